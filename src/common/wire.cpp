#include "cudal1/common/wire.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>

namespace cudal1::wire {
namespace {

void write_all(int fd, const void* data, std::size_t size) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::system_error(errno, std::generic_category(), "write to peer");
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
}

}  // namespace

void write_message(int fd, const Message& message) {
  nlohmann::json header = message.header;
  if (!message.payload.empty()) header["payload_bytes"] = message.payload.size();
  std::string line = header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  line.push_back('\n');
  write_all(fd, line.data(), line.size());
  if (!message.payload.empty()) write_all(fd, message.payload.data(), message.payload.size());
}

void FrameReader::feed(const std::byte* data, std::size_t size) {
  // Compact before growing so a long session does not keep every byte it ever read.
  if (consumed_ > 0 && consumed_ >= buffer_.size() / 2) {
    buffer_.erase(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(consumed_));
    consumed_ = 0;
  }
  buffer_.insert(buffer_.end(), data, data + size);
}

std::byte* FrameReader::payload_room(std::size_t more) {
  const std::size_t need = payload_filled_ + more;
  if (payload_.size() < need) {
    // Before, the vector was grown to filled + max(1 MiB, filled) for every read(2) and cut
    // back to what the read returned (at most a pipe's 1 MiB): each read zeroed up to the whole
    // payload again, and a 512 MiB tensor crossed at about 300 MB/s.
    payload_.resize(std::min(payload_size_, std::max(need, 2 * payload_.size())));
  }
  return payload_.data() + payload_filled_;
}

long FrameReader::read_from(int fd) {
  if (header_ && buffer_.size() == consumed_ && payload_filled_ < payload_size_) {
    // Straight into the payload.
    const std::size_t step =
        std::min(payload_size_ - payload_filled_,
                 std::max<std::size_t>(1u << 20, payload_.size() - payload_filled_));
    const ssize_t n = ::read(fd, payload_room(step), step);
    if (n > 0) payload_filled_ += static_cast<std::size_t>(n);
    return n;
  }
  std::array<std::byte, 1u << 16> chunk;
  const ssize_t n = ::read(fd, chunk.data(), chunk.size());
  if (n > 0) feed(chunk.data(), static_cast<std::size_t>(n));
  return n;
}

std::optional<Message> FrameReader::next() {
  if (!header_) {
    const auto begin = buffer_.begin() + static_cast<std::ptrdiff_t>(consumed_);
    const auto newline = std::find(begin, buffer_.end(), std::byte{'\n'});
    if (newline == buffer_.end()) {
      if (static_cast<std::size_t>(buffer_.end() - begin) > kMaxHeaderBytes) {
        throw std::runtime_error("peer sent a header line longer than 16 MiB");
      }
      return std::nullopt;
    }
    const std::string line(reinterpret_cast<const char*>(&*begin),
                           static_cast<std::size_t>(newline - begin));
    consumed_ += line.size() + 1;
    nlohmann::json header = nlohmann::json::parse(line, nullptr, false);
    if (header.is_discarded() || !header.is_object()) {
      throw std::runtime_error("peer sent a malformed message header: " + line.substr(0, 200));
    }
    payload_size_ = header.value("payload_bytes", std::size_t{0});
    if (payload_size_ > max_payload_) {
      throw std::runtime_error("peer announced a payload of " + std::to_string(payload_size_) +
                               " bytes, more than the " + std::to_string(max_payload_) +
                               " its process may hold");
    }
    payload_.clear();
    payload_.reserve(payload_size_);
    payload_filled_ = 0;
    header_ = std::move(header);
  }
  // Payload bytes that arrived with the header (or were fed) move over to the payload.
  const std::size_t take = std::min(buffer_.size() - consumed_, payload_size_ - payload_filled_);
  if (take > 0) {
    std::memcpy(payload_room(take), buffer_.data() + consumed_, take);
    payload_filled_ += take;
    consumed_ += take;
  }
  if (consumed_ == buffer_.size()) {
    buffer_.clear();
    consumed_ = 0;
  }
  // Complete: payload_room() never grows the vector past payload_size_, so it is exactly full.
  if (payload_filled_ < payload_size_) return std::nullopt;
  Message message{std::move(*header_), std::move(payload_)};
  header_.reset();
  payload_ = {};
  payload_filled_ = 0;
  payload_size_ = 0;
  return message;
}

std::size_t FrameReader::pending_payload_bytes() const {
  if (!header_) return 0;
  const std::size_t missing = payload_size_ - payload_filled_;
  const std::size_t buffered = buffer_.size() - consumed_;
  return buffered >= missing ? 0 : missing - buffered;
}

std::optional<Message> read_message_blocking(int fd, FrameReader& reader) {
  for (;;) {
    if (auto message = reader.next()) return message;
    const long n = reader.read_from(fd);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::system_error(errno, std::generic_category(), "read from peer");
    }
    if (n == 0) return std::nullopt;
  }
}

}  // namespace cudal1::wire
