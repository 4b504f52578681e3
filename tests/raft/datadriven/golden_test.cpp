// Golden, datadriven tests of the Raft core (after etcd-io/raft's testdata/*.txt): each file under
// testdata/ is a scenario whose whole Ready stream, command by command, must match the output written
// below each command. RAFTLOG_REWRITE_GOLDEN=1 rewrites the files from the actual output instead
// (docs/testing.md); review the diff before committing it.
//
// Also compiled against a broken-rule core (RAFTLOG_GOLDEN_BROKEN_SCENARIO names the scenario that
// rule must change): there the file must no longer match, which shows that these files can fail.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "interaction.h"
#include "script.h"

namespace raftlog::raft::golden {
namespace {

const std::filesystem::path kTestdata = RAFTLOG_GOLDEN_TESTDATA;

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct ScenarioRun {
  Script actual;  // the script with every directive's output replaced by the actual one
  std::vector<Mismatch> mismatches;
  std::string error;  // a script error: the line and the problem (the run stops there)
};

// With `stop_at_first_mismatch` the run ends at the first directive whose output differs (a broken
// core may go on to abort on its own assertions).
ScenarioRun run_scenario(const Script& script, bool stop_at_first_mismatch = false) {
  ScenarioRun run{script, {}, {}};
  Interaction interaction;
  for (ScriptItem& item : run.actual.items) {
    auto* directive = std::get_if<Directive>(&item);
    if (directive == nullptr) continue;
    Lines output;
    try {
      output = interaction.run(directive->command, directive->input);
    } catch (const ScriptError& error) {
      run.error =
          fmt::format("line {}: '{}': {}", directive->line, directive->command, error.what());
      return run;
    }
    std::optional<Mismatch> mismatch = compare_output(*directive, output);
    directive->output = std::move(output);
    if (mismatch) {
      run.mismatches.push_back(std::move(*mismatch));
      if (stop_at_first_mismatch) return run;
    }
  }
  return run;
}

#ifndef RAFTLOG_GOLDEN_BROKEN_SCENARIO

ScenarioRun run_file(const std::filesystem::path& path) {
  const ParseResult parsed = parse_script(read_file(path));
  if (!parsed.script) return ScenarioRun{{}, {}, parsed.error};
  return run_scenario(*parsed.script);
}

bool rewrite_requested() {
  const char* value = std::getenv("RAFTLOG_REWRITE_GOLDEN");
  return value != nullptr && std::string(value) == "1";
}

std::vector<std::string> scenario_names() {
  std::vector<std::string> names;
  for (const auto& file : std::filesystem::directory_iterator(kTestdata)) {
    if (file.path().extension() == ".txt") names.push_back(file.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

class Golden : public ::testing::TestWithParam<std::string> {};

TEST_P(Golden, WholeReadyStreamMatchesItsFile) {
  const std::filesystem::path path = kTestdata / (GetParam() + ".txt");
  const ScenarioRun run = run_file(path);
  ASSERT_TRUE(run.error.empty()) << path.string() << ": " << run.error;
  if (rewrite_requested()) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << render_script(run.actual);
    if (!run.mismatches.empty()) std::cout << "rewrote " << path.string() << "\n";
    return;
  }
  for (const Mismatch& mismatch : run.mismatches)
    ADD_FAILURE() << path.string() << ":" << mismatch.report;
  // Every output matched: what is left to differ is layout (e.g. extra blank lines), which a rewrite fixes.
  if (run.mismatches.empty()) {
    EXPECT_TRUE(render_script(run.actual) == read_file(path))
        << path.string() << " is not in canonical form: rerun with RAFTLOG_REWRITE_GOLDEN=1";
  }
}

INSTANTIATE_TEST_SUITE_P(Scenarios, Golden, ::testing::ValuesIn(scenario_names()),
                         [](const ::testing::TestParamInfo<std::string>& param_info) {
                           std::string name = param_info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(GoldenFiles, EveryRequiredScenarioIsThere) {
  const std::vector<std::string> names = scenario_names();
  for (const char* required : {"election", "figure8", "conflict_truncation", "leadership_transfer",
                               "read_index", "proposal_atomicity"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), required), names.end())
        << required << ".txt is missing";
  }
}

// The comparison itself can fail: one changed expected line is reported, at its directive.
TEST(GoldenFiles, AChangedExpectedLineIsReported) {
  ParseResult parsed = parse_script(read_file(kTestdata / "election.txt"));
  ASSERT_TRUE(parsed.script.has_value()) << parsed.error;
  Directive* changed = nullptr;
  for (ScriptItem& item : parsed.script->items) {
    auto* directive = std::get_if<Directive>(&item);
    if (directive != nullptr && directive->command == "stabilize") {
      changed = directive;
      break;
    }
  }
  ASSERT_NE(changed, nullptr);
  ASSERT_FALSE(changed->output.empty());
  changed->output.back() += " (edited)";
  const ScenarioRun run = run_scenario(*parsed.script);
  ASSERT_TRUE(run.error.empty()) << run.error;
  ASSERT_EQ(run.mismatches.size(), 1u);
  EXPECT_EQ(run.mismatches[0].line, changed->line);
  EXPECT_NE(run.mismatches[0].report.find(" (edited)"), std::string::npos)
      << run.mismatches[0].report;
}

TEST(GoldenFormat, CanonicalTextRendersToItself) {
  const std::string text =
      "# a comment\n\nadd-nodes 2\n2 log=1 term=1\n----\nline one\nline two\n\n# next\nstatus "
      "1\n----\nok\n";
  const ParseResult parsed = parse_script(text);
  ASSERT_TRUE(parsed.script.has_value()) << parsed.error;
  ASSERT_EQ(parsed.script->items.size(), 5u);
  const Directive& first = std::get<Directive>(parsed.script->items[2]);
  EXPECT_EQ(first.line, 3);
  EXPECT_EQ(first.input, std::vector<std::string>{"2 log=1 term=1"});
  EXPECT_EQ(first.output, (std::vector<std::string>{"line one", "line two"}));
  EXPECT_EQ(render_script(*parsed.script), text);
}

TEST(GoldenFormat, ACommandWithoutSeparatorIsRefused) {
  const ParseResult parsed = parse_script("status\nok\n");
  EXPECT_FALSE(parsed.script.has_value());
  EXPECT_NE(parsed.error.find("line 1"), std::string::npos) << parsed.error;
}

TEST(GoldenFormat, ScriptMistakesAreErrorsNotOutput) {
  Interaction interaction;
  EXPECT_THROW(interaction.run("status", {}), ScriptError) << "add-nodes must come first";
  EXPECT_THROW(Interaction().run("add-nodes 2", {"1 log=1,2 term=1"}), ScriptError)
      << "a log term past the hard state";
  EXPECT_THROW(Interaction().run("add-nodes 2", {"3 log=1"}), ScriptError) << "no node 3";
  interaction.run("add-nodes 3", {});
  EXPECT_THROW(interaction.run("campain 1", {}), ScriptError);
  EXPECT_THROW(interaction.run("campaign 4", {}), ScriptError);
  EXPECT_THROW(interaction.run("tick 1 x", {}), ScriptError);
  EXPECT_THROW(interaction.run("deliver-msgs type=Apend", {}), ScriptError);
  EXPECT_THROW(interaction.run("stabilize 1", {}), ScriptError);
  EXPECT_THROW(interaction.run("stabilize colour=red", {}), ScriptError);
  EXPECT_THROW(interaction.run("status 1", {"input"}), ScriptError);
}

#else  // RAFTLOG_GOLDEN_BROKEN_SCENARIO

// Linked against a broken-rule core: the scenario written for that rule must no longer match.
class GoldenBrokenCore : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenBrokenCore, ScenarioNoLongerMatches) {
  const std::filesystem::path path = kTestdata / (GetParam() + ".txt");
  ASSERT_TRUE(std::filesystem::exists(path)) << path.string();
  const ParseResult parsed = parse_script(read_file(path));
  ASSERT_TRUE(parsed.script.has_value()) << path.string() << ": " << parsed.error;
  const ScenarioRun run = run_scenario(*parsed.script, /*stop_at_first_mismatch=*/true);
  ASSERT_TRUE(run.error.empty()) << path.string() << ": " << run.error;
  ASSERT_FALSE(run.mismatches.empty()) << "the broken rule left " << path.string() << " unchanged";
  std::cout << "first difference, as expected with the broken rule:\n"
            << run.mismatches.front().report;
}

// The scenario names the test, so the variants' ctest names differ.
INSTANTIATE_TEST_SUITE_P(BrokenRule, GoldenBrokenCore,
                         ::testing::Values(std::string(RAFTLOG_GOLDEN_BROKEN_SCENARIO)),
                         [](const ::testing::TestParamInfo<std::string>& param_info) {
                           return param_info.param;
                         });

#endif

}  // namespace
}  // namespace raftlog::raft::golden
