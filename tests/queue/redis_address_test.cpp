// --queue URLs: what is accepted, what each part means, and the messages for what is not.
#include "cudal1/queue/redis_address.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include "cudal1/common/error.hpp"

namespace cudal1::queue {
namespace {

std::string error_of(const std::string& url) {
  try {
    parse_redis_url(url);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

class RedisAddressTest : public ::testing::Test {
 protected:
  void SetUp() override { ::unsetenv("CUDAL1_REDIS_PASSWORD"); }
  void TearDown() override { ::unsetenv("CUDAL1_REDIS_PASSWORD"); }
};

TEST_F(RedisAddressTest, HostPortAndDatabase) {
  const RedisAddress a = parse_redis_url("redis://10.0.0.5:6380/3");
  EXPECT_EQ(a.host, "10.0.0.5");
  EXPECT_EQ(a.port, 6380);
  EXPECT_EQ(a.db, 3);
  EXPECT_EQ(a.password, "");
  const RedisAddress b = parse_redis_url("redis://queue.internal");
  EXPECT_EQ(b.port, 6379);
  EXPECT_EQ(b.db, 0);
  EXPECT_EQ(parse_redis_url("redis://[::1]:7000/").host, "::1");
}

TEST_F(RedisAddressTest, PasswordFromTheUrlOrTheEnvironment) {
  const RedisAddress a = parse_redis_url("redis://:s3cr%40t@host:6379/0");
  EXPECT_EQ(a.password, "s3cr@t");
  EXPECT_EQ(a.display(), "redis://:***@host:6379/0");
  ::setenv("CUDAL1_REDIS_PASSWORD", "from-env", 1);
  EXPECT_EQ(parse_redis_url("redis://host:6379").password, "from-env");
  EXPECT_EQ(parse_redis_url("redis://:url@host:6379").password, "url");
}

TEST_F(RedisAddressTest, MistakesAreNamed) {
  EXPECT_NE(error_of("http://host:6379").find("does not start with redis://"), std::string::npos);
  EXPECT_NE(error_of("redis://host:port").find("port 'port'"), std::string::npos);
  EXPECT_NE(error_of("redis://host:70000").find("from 1 to 65535"), std::string::npos);
  EXPECT_NE(error_of("redis://host:6379/x").find("database number"), std::string::npos);
  EXPECT_NE(error_of("redis://user@host").find(":PASSWORD@"), std::string::npos);
  EXPECT_NE(error_of("redis://:6379").find("no host"), std::string::npos);
  EXPECT_NE(error_of("redis://:a%zz@host").find("two hex digits"), std::string::npos);
  EXPECT_NE(error_of("redis://host:port").find("--queue"), std::string::npos);
}

}  // namespace
}  // namespace cudal1::queue
