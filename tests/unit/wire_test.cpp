#include "cudal1/common/wire.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <thread>

namespace cudal1::wire {
namespace {

std::vector<std::byte> bytes_of(const std::string& s) {
  std::vector<std::byte> out(s.size());
  std::memcpy(out.data(), s.data(), s.size());
  return out;
}

TEST(Wire, RoundTripThroughAPipe) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  Message sent{{{"op", "trial"}, {"seed", 7}}, bytes_of(std::string("\0\1binary\n", 9))};
  write_message(fds[1], sent);
  write_message(fds[1], {{{"op", "exit"}}, {}});
  close(fds[1]);
  FrameReader reader;
  auto first = read_message_blocking(fds[0], reader);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->header["op"], "trial");
  EXPECT_EQ(first->header["payload_bytes"], 9);
  EXPECT_EQ(first->payload, sent.payload);
  auto second = read_message_blocking(fds[0], reader);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->header["op"], "exit");
  EXPECT_TRUE(second->payload.empty());
  EXPECT_FALSE(read_message_blocking(fds[0], reader));
  close(fds[0]);
}

TEST(Wire, ALargePayloadIsReadWholeAndTheNextMessageIsIntact) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  std::vector<std::byte> big(5u << 20);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<std::byte>(i * 131 % 251);
  std::thread writer([&] {
    write_message(fds[1], {{{"op", "sample"}}, big});
    write_message(fds[1], {{{"op", "after"}}, bytes_of("xyz")});
    close(fds[1]);
  });
  FrameReader reader;
  auto first = read_message_blocking(fds[0], reader);
  auto second = read_message_blocking(fds[0], reader);
  writer.join();
  close(fds[0]);
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->payload, big);
  EXPECT_EQ(second->header["op"], "after");
  EXPECT_EQ(second->payload, bytes_of("xyz"));
}

TEST(Wire, MessagesSplitAcrossFeedsAreReassembled) {
  const std::string stream = std::string("{\"payload_bytes\":4,\"x\":1}\nabcd{\"y\":2}\n");
  FrameReader reader;
  std::vector<Message> got;
  for (char c : stream) {
    const std::byte b{static_cast<unsigned char>(c)};
    reader.feed(&b, 1);
    while (auto m = reader.next()) got.push_back(*m);
  }
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].payload, bytes_of("abcd"));
  EXPECT_EQ(got[1].header["y"], 2);
}

TEST(Wire, APayloadLargerThanThePeerMayHoldIsAnError) {
  FrameReader reader;
  reader.set_max_payload(1024);
  const std::string header = R"({"ok":true,"payload_bytes":1000000000000})"
                             "\n";
  reader.feed(reinterpret_cast<const std::byte*>(header.data()), header.size());
  EXPECT_THROW(reader.next(), std::runtime_error);
  FrameReader within;
  within.set_max_payload(1024);
  const std::string small = R"({"ok":true,"payload_bytes":4})"
                            "\nabcd";
  within.feed(reinterpret_cast<const std::byte*>(small.data()), small.size());
  const auto message = within.next();
  ASSERT_TRUE(message);
  EXPECT_EQ(message->payload.size(), 4u);
}

TEST(Wire, MalformedHeaderIsAnError) {
  FrameReader reader;
  const auto junk = bytes_of("this is not json\n");
  reader.feed(junk.data(), junk.size());
  EXPECT_THROW(reader.next(), std::runtime_error);
}

TEST(Wire, PendingPayloadIsReported) {
  FrameReader reader;
  const auto head = bytes_of("{\"payload_bytes\":100}\nab");
  reader.feed(head.data(), head.size());
  EXPECT_FALSE(reader.next());
  EXPECT_EQ(reader.pending_payload_bytes(), 98u);
}

}  // namespace
}  // namespace cudal1::wire
