#include "cudal1/common/wire.hpp"

#include <unistd.h>

#include <algorithm>
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
    header_ = std::move(header);
  }
  if (buffer_.size() - consumed_ < payload_size_) return std::nullopt;
  Message message{std::move(*header_), {}};
  const auto begin = buffer_.begin() + static_cast<std::ptrdiff_t>(consumed_);
  message.payload.assign(begin, begin + static_cast<std::ptrdiff_t>(payload_size_));
  consumed_ += payload_size_;
  header_.reset();
  payload_size_ = 0;
  return message;
}

std::size_t FrameReader::pending_payload_bytes() const {
  if (!header_) return 0;
  const std::size_t have = buffer_.size() - consumed_;
  return have >= payload_size_ ? 0 : payload_size_ - have;
}

std::optional<Message> read_message_blocking(int fd, FrameReader& reader) {
  std::vector<std::byte> chunk(1u << 16);
  for (;;) {
    if (auto message = reader.next()) return message;
    // Large payloads are read in one go instead of 64 KiB at a time.
    const std::size_t want = std::max(chunk.size(), reader.pending_payload_bytes());
    if (want > chunk.size()) chunk.resize(want);
    const ssize_t n = ::read(fd, chunk.data(), want);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::system_error(errno, std::generic_category(), "read from peer");
    }
    if (n == 0) return std::nullopt;
    reader.feed(chunk.data(), static_cast<std::size_t>(n));
  }
}

}  // namespace cudal1::wire
