// The golden file format, after the datadriven files of etcd-io/raft's testdata: each directive is a
// command line, optional input lines, a line "----", then the expected output up to the first blank
// line. Lines starting with '#' and blank lines between directives are kept verbatim, so a file
// rewritten from actual output keeps its comments.
//
//   # Node 1 wins the election.
//   campaign 1
//   ----
//   n1 times out after 13 ticks: PreCandidate term=0
//
// Output lines are never blank (a blank line ends the output); a command with nothing to say prints "ok".
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace raftlog::raft::golden {

struct Directive {
  int line = 0;                     // 1-based line number of the command in its file
  std::string command;              // the command line itself
  std::vector<std::string> input;   // lines between the command and "----"
  std::vector<std::string> output;  // the expected output (after a run: what to write back)
};

// A verbatim line (comment or blank) or a directive, in file order.
using ScriptItem = std::variant<std::string, Directive>;

struct Script {
  std::vector<ScriptItem> items;
};

struct ParseResult {
  std::optional<Script> script;
  std::string error;  // set when script is empty: the line and the problem
};

ParseResult parse_script(const std::string& text);
// The file text for `script`: parse_script(render_script(s)) gives back s, and a file that is already
// in this canonical form renders to itself byte for byte.
std::string render_script(const Script& script);

// One directive whose actual output differs from its expected output, as a readable report.
struct Mismatch {
  int line = 0;
  std::string report;  // the command, then the expected and the actual lines
};

std::optional<Mismatch> compare_output(const Directive& directive,
                                       const std::vector<std::string>& actual);

}  // namespace raftlog::raft::golden
