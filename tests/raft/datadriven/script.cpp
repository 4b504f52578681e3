#include "script.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>

namespace raftlog::raft::golden {

namespace {

constexpr const char* kSeparator = "----";

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = text.find('\n', start);
    if (end == std::string::npos) {
      lines.push_back(text.substr(start));
      break;
    }
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

bool is_verbatim(const std::string& line) { return line.empty() || line.front() == '#'; }

}  // namespace

ParseResult parse_script(const std::string& text) {
  const std::vector<std::string> lines = split_lines(text);
  Script script;
  std::size_t i = 0;
  while (i < lines.size()) {
    if (is_verbatim(lines[i])) {
      script.items.emplace_back(lines[i++]);
      continue;
    }
    Directive directive;
    directive.line = static_cast<int>(i) + 1;
    directive.command = lines[i++];
    while (i < lines.size() && lines[i] != kSeparator) directive.input.push_back(lines[i++]);
    if (i == lines.size()) {
      return {std::nullopt, fmt::format("line {}: command '{}' has no '{}' line", directive.line,
                                        directive.command, kSeparator)};
    }
    ++i;  // the separator
    while (i < lines.size() && !lines[i].empty()) directive.output.push_back(lines[i++]);
    if (i < lines.size()) ++i;  // the blank line that ends the output belongs to the directive
    script.items.emplace_back(std::move(directive));
  }
  return {std::move(script), {}};
}

std::string render_script(const Script& script) {
  std::string text;
  for (std::size_t i = 0; i < script.items.size(); ++i) {
    if (const auto* verbatim = std::get_if<std::string>(&script.items[i])) {
      text += *verbatim + "\n";
      continue;
    }
    const Directive& directive = std::get<Directive>(script.items[i]);
    text += directive.command + "\n";
    for (const std::string& line : directive.input) text += line + "\n";
    text += std::string(kSeparator) + "\n";
    for (const std::string& line : directive.output) text += line + "\n";
    if (i + 1 < script.items.size()) text += "\n";
  }
  return text;
}

// The report is a small diff: the lines both outputs share at the start and at the end are left out
// but for a few lines of context; what differs in between is shown as "- expected" and "+ actual".
std::optional<Mismatch> compare_output(const Directive& directive,
                                       const std::vector<std::string>& actual) {
  const std::vector<std::string>& expected = directive.output;
  if (expected == actual) return std::nullopt;
  constexpr std::size_t kContextLines = 3;
  std::size_t prefix = 0;
  while (prefix < expected.size() && prefix < actual.size() && expected[prefix] == actual[prefix])
    ++prefix;
  std::size_t suffix = 0;
  while (suffix < expected.size() - prefix && suffix < actual.size() - prefix &&
         expected[expected.size() - 1 - suffix] == actual[actual.size() - 1 - suffix]) {
    ++suffix;
  }
  std::string report = fmt::format("line {}: '{}': the output differs from its line {} on\n",
                                   directive.line, directive.command, prefix + 1);
  for (std::size_t i = prefix > kContextLines ? prefix - kContextLines : 0; i < prefix; ++i) {
    report += "  " + expected[i] + "\n";
  }
  for (std::size_t i = prefix; i < expected.size() - suffix; ++i)
    report += "- " + expected[i] + "\n";
  for (std::size_t i = prefix; i < actual.size() - suffix; ++i) report += "+ " + actual[i] + "\n";
  const std::size_t context_end =
      std::min(expected.size(), expected.size() - suffix + kContextLines);
  for (std::size_t i = expected.size() - suffix; i < context_end; ++i)
    report += "  " + expected[i] + "\n";
  return Mismatch{directive.line, std::move(report)};
}

}  // namespace raftlog::raft::golden
