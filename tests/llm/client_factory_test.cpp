#include <gtest/gtest.h>

#include "cudal1/llm/client.hpp"

namespace cudal1::llm {
namespace {

std::string rejection(const std::string& spec, ClientOptions options = {}) {
  try {
    make_client(spec, options);
  } catch (const std::invalid_argument& error) {
    return error.what();
  }
  ADD_FAILURE() << "accepted '" << spec << "'";
  return {};
}

TEST(MakeClient, PicksTheBackEndFromTheSpec) {
  EXPECT_EQ(make_client("http://localhost:8000/v1")->describe(), "http://localhost:8000/v1");
  EXPECT_EQ(make_client("https://api.example.com/v1/")->describe(), "https://api.example.com/v1");
  EXPECT_EQ(make_client("cmd:llm -m coder")->describe(), "cmd:llm -m coder");
}

TEST(MakeClient, RejectsOtherSpecsListingTheAcceptedForms) {
  for (const std::string spec : {"", "localhost:8000/v1", "ftp://host/v1",
                                 "cmd:", "cmd:   ", "http://", "command:cat", "HTTP//host"}) {
    const std::string message = rejection(spec);
    EXPECT_NE(message.find("http://"), std::string::npos) << spec << ": " << message;
    EXPECT_NE(message.find("cmd:COMMAND"), std::string::npos) << spec << ": " << message;
  }
}

TEST(MakeClient, RejectsImpossibleLimits) {
  ClientOptions none;
  none.concurrency = 0;
  EXPECT_NE(rejection("http://localhost:1/v1", none).find("concurrency"), std::string::npos);
  EXPECT_NE(rejection("cmd:cat", none).find("concurrency"), std::string::npos);
  ClientOptions negative;
  negative.max_retries = -1;
  EXPECT_NE(rejection("http://localhost:1/v1", negative).find("max_retries"), std::string::npos);
}

}  // namespace
}  // namespace cudal1::llm
