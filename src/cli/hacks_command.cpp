// cudal1 hacks add / list / similar: the hack-case database the reward checker compares
// suspicious candidates with (docs/review.md); cudal1 flags: the table of verdict flags.
#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "cudal1/common/error.hpp"
#include "cudal1/common/text_file.hpp"
#include "cudal1/eval/defenses.hpp"
#include "cudal1/eval/flags.hpp"
#include "cudal1/review/hack_corpus.hpp"
#include "option_domains.hpp"

namespace cudal1::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct HacksArguments {
  std::string hacks;  // --hacks DIR
  std::string file;
  std::string hack_class;
  std::string name;
  std::string description;
  std::string task;
  std::size_t k = 3;
  bool json_output = false;
};

fs::path corpus_dir(const HacksArguments& args) {
  return args.hacks.empty() ? review::default_hacks_dir() : fs::path(args.hacks);
}

void print_warnings(const std::vector<std::string>& warnings) {
  for (const auto& w : warnings) std::cerr << "cudal1 hacks: warning: " << w << "\n";
}

template <typename Body>
int guarded(Body body) {
  try {
    return body();
  } catch (const InputError& e) {
    std::cerr << "cudal1 hacks: " << e.what() << std::endl;
    return kExitBadInput;
  } catch (const std::exception& e) {
    std::cerr << "cudal1 hacks: internal error: " << e.what() << std::endl;
    return kExitInternal;
  }
}

int add_case(const HacksArguments& args) {
  return guarded([&] {
    std::vector<std::string> warnings;
    const fs::path dir = corpus_dir(args);
    const review::HackCase added = review::HackCorpus::add(
        dir, {args.file, args.hack_class, args.name, args.description, args.task}, warnings);
    print_warnings(warnings);
    std::cout << fmt::format("added case '{}' (class {}) as {}", added.name, added.hack_class,
                             added.path.string())
              << std::endl;
    return kExitOk;
  });
}

int list_cases(const HacksArguments& args) {
  return guarded([&] {
    const review::HackCorpus corpus = review::HackCorpus::load(corpus_dir(args));
    print_warnings(corpus.warnings());
    json listed = json::array();
    for (const auto& c : corpus.cases()) {
      if (!args.hack_class.empty() && c.hack_class != args.hack_class) continue;
      listed.push_back({{"name", c.name},
                        {"class", c.hack_class},
                        {"file", c.file},
                        {"path", c.path.string()},
                        {"description", c.description},
                        {"task", c.task},
                        {"added_at", c.added_at},
                        {"sha256", c.sha256}});
    }
    if (args.json_output) {
      std::cout << listed.dump(2) << std::endl;
      return kExitOk;
    }
    for (const auto& c : listed) {
      std::cout << fmt::format("{:<28} {:<22} {}", c["name"].get<std::string>(),
                               c["class"].get<std::string>(), c["path"].get<std::string>());
      if (!c["description"].get<std::string>().empty())
        std::cout << "  # " << c["description"].get<std::string>();
      std::cout << "\n";
    }
    std::cerr << fmt::format("{} of {} cases in {}", listed.size(), corpus.cases().size(),
                             corpus.dir().string())
              << std::endl;
    return kExitOk;
  });
}

int similar_cases(const HacksArguments& args) {
  return guarded([&] {
    const std::string source = read_source_file(args.file, "candidate");
    const review::HackCorpus corpus = review::HackCorpus::load(corpus_dir(args));
    print_warnings(corpus.warnings());
    const auto fingerprint = review::CodeFingerprint::of(source);
    const auto ranked = corpus.most_similar(fingerprint, args.k);
    json out = {{"file", args.file},
                {"features", fingerprint.api_features()},
                {"similar_cases", json::array()}};
    for (const auto& s : ranked) {
      out["similar_cases"].push_back({{"name", s.hack_case->name},
                                      {"class", s.hack_case->hack_class},
                                      {"score", s.similarity.score},
                                      {"code_score", s.similarity.code},
                                      {"api_score", s.similarity.api},
                                      {"shared_features", s.similarity.shared_api},
                                      {"file", s.hack_case->path.string()}});
    }
    if (args.json_output) {
      std::cout << out.dump(2) << std::endl;
      return kExitOk;
    }
    std::string features;
    for (const auto& f : fingerprint.api_features()) features += (features.empty() ? "" : ", ") + f;
    std::cout << fmt::format("suspicious features of {}: {}\n", args.file,
                             features.empty() ? "none" : features);
    for (const auto& s : ranked) {
      std::string shared;
      for (const auto& f : s.similarity.shared_api) shared += (shared.empty() ? "" : ",") + f;
      std::cout << fmt::format("{:.3f}  {:<28} {:<22} {}{}\n", s.similarity.score,
                               s.hack_case->name, s.hack_case->hack_class,
                               s.hack_case->path.string(),
                               shared.empty() ? "" : "  shared: " + shared);
    }
    return kExitOk;
  });
}

// `folder`: what the corpus directory must be (`add` creates it, the others read it).
void add_corpus_option(CLI::App* command, HacksArguments& args, const CLI::Validator& folder) {
  command
      ->add_option("--hacks", args.hacks,
                   "hack corpus directory (default: $CUDAL1_HACKS_DIR, else the repository's "
                   "hacks/)")
      ->check(folder);
}

// The defenses, in the order they run, and the flags each may raise.
int print_defenses(bool json_output) {
  const json list = defenses_to_json();
  if (json_output) {
    std::cout << list.dump(2) << std::endl;
    return kExitOk;
  }
  std::cout << fmt::format("{:<16} {:<10} {:<32} {}\n", "defense", "phase", "flags", "checks");
  for (const json& d : list) {
    std::string flags;
    for (const json& f : d["flags"]) flags += (flags.empty() ? "" : ",") + f.get<std::string>();
    std::cout << fmt::format("{:<16} {:<10} {:<32} {}\n", d["name"].get<std::string>(),
                             d["phase"].get<std::string>(), flags, d["summary"].get<std::string>());
  }
  return kExitOk;
}

int print_flags(bool json_output) {
  if (json_output) {
    json out = json::array();
    for (const FlagInfo& f : flag_table()) {
      out.push_back({{"name", f.name},
                     {"effect", to_string(f.effect)},
                     {"hack_class", f.hack_class},
                     {"description", f.description}});
    }
    std::cout << out.dump(2) << std::endl;
    return kExitOk;
  }
  std::cout << fmt::format("{:<21} {:<7} {:<6} {}\n", "flag", "effect", "class", "meaning");
  for (const FlagInfo& f : flag_table()) {
    std::cout << fmt::format("{:<21} {:<7} {:<6} {}\n", f.name, to_string(f.effect),
                             f.hack_class ? "yes" : "", f.description);
  }
  std::cout << "reject: status rejected, reward the floor; info: shown, the verdict stands; task: "
               "about the task (task_flags); corpus: a hack class no automatic check raises. "
               "class: a class of the hack-case database.\n";
  return kExitOk;
}

}  // namespace

Command add_flags_command(CLI::App& app) {
  auto json_output = std::make_shared<bool>(false);
  auto defenses = std::make_shared<bool>(false);
  CLI::App* flags = app.add_subcommand(
      "flags", "The flags a verdict can carry: effect, hack class and meaning (one table)");
  flags->add_flag("--json", *json_output, "print JSON");
  flags->add_flag("--defenses", *defenses,
                  "the defenses instead: the checks that raise flags while a candidate is timed, "
                  "in the order they run (src/eval/defenses/)");
  return [json_output, defenses] {
    return *defenses ? print_defenses(*json_output) : print_flags(*json_output);
  };
}

Command add_hacks_command(CLI::App& app) {
  auto a = std::make_shared<HacksArguments>();
  CLI::App* hacks = app.add_subcommand("hacks", "The hack-case database used by the reviewer");
  hacks->require_subcommand(1);

  CLI::App* add = hacks->add_subcommand("add", "Copy a known hack candidate into the corpus");
  add->add_option("file", a->file, "the hack candidate (a Python file)")->required();
  add->add_option("--class", a->hack_class, "its hack class, e.g. lazy_output")->required();
  add->add_option("--name", a->name, "case name (default: the file's stem)");
  add->add_option("--description", a->description, "what the hack does, in one line");
  add->add_option("--task", a->task, "the task it was found on");
  add_corpus_option(add, *a, output_folder());

  CLI::App* list = hacks->add_subcommand("list", "List the cases of the corpus");
  list->add_option("--class", a->hack_class, "only this class");
  list->add_flag("--json", a->json_output, "print JSON");
  add_corpus_option(list, *a, CLI::ExistingDirectory);

  CLI::App* similar =
      hacks->add_subcommand("similar", "The cases most similar to a file, with their scores");
  similar->add_option("file", a->file, "a candidate file")->required();
  similar->add_option("-k", a->k, "how many cases")->check(whole_number(1))->capture_default_str();
  similar->add_flag("--json", a->json_output, "print JSON");
  add_corpus_option(similar, *a, CLI::ExistingDirectory);

  return [a, add, list] {
    if (add->parsed()) return add_case(*a);
    if (list->parsed()) return list_cases(*a);
    return similar_cases(*a);
  };
}

}  // namespace cudal1::cli
