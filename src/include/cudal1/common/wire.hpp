// Framing of the messages exchanged between the orchestrator and a worker process.
//
// A message is one line of JSON (the header) optionally followed by raw bytes (the payload):
// the header's "payload_bytes" field says how many. Tensors travel as payloads so that the
// orchestrator compares raw memory, never values a worker formatted for it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace cudal1::wire {

struct Message {
  nlohmann::json header;
  std::vector<std::byte> payload;
};

// Writes one message; throws std::system_error when the peer is gone.
void write_message(int fd, const Message& message);

// Accumulates bytes read from a file descriptor and cuts them into messages. A payload is
// read straight into the message it belongs to: a 32 MB tensor is not copied through buffers.
class FrameReader {
 public:
  // Largest header line accepted: a peer sending an endless line is broken or hostile.
  static constexpr std::size_t kMaxHeaderBytes = 16u << 20;

  // Feeds bytes read from the peer.
  void feed(const std::byte* data, std::size_t size);
  // Reads what is available from `fd` (one read(2)): into the pending payload when one is
  // incomplete, else into the header buffer. Returns read(2)'s result (0 at end of file).
  long read_from(int fd);
  // Returns the next complete message, if one has arrived. Throws std::runtime_error on a
  // malformed header.
  std::optional<Message> next();
  // Bytes still needed before the pending message is complete (0 when unknown or none pending).
  std::size_t pending_payload_bytes() const;
  // The largest payload a message may announce; next() throws for a larger one. A candidate's
  // worker could otherwise stream bytes until the orchestrator runs out of memory.
  void set_max_payload(std::size_t bytes) { max_payload_ = bytes; }

 private:
  std::vector<std::byte> buffer_;  // header bytes (and what follows them in the same read)
  std::size_t consumed_ = 0;
  std::optional<nlohmann::json> header_;
  // Room for `more` bytes after the filled part of the payload. The vector grows by doubling
  // (each byte is zeroed once), and only as bytes arrive: a header's claim alone commits nothing.
  std::byte* payload_room(std::size_t more);

  // The pending message's payload: payload_filled_ bytes have arrived of payload_size_. Its
  // memory is reserved at once; payload_.size() is the part grown so far.
  std::vector<std::byte> payload_;
  std::size_t payload_filled_ = 0;
  std::size_t payload_size_ = 0;
  std::size_t max_payload_ = SIZE_MAX;
};

// Blocking read of one message (used by the worker, which has nothing else to do while waiting).
// Returns nullopt at end of file.
std::optional<Message> read_message_blocking(int fd, FrameReader& reader);

}  // namespace cudal1::wire
