#include "cli/flags.h"

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <utility>

#include "util/check.h"

namespace raftlog::cli {
namespace {

std::string lower(std::string_view text) {
  std::string result(text);
  std::transform(result.begin(), result.end(), result.begin(), [](unsigned char c) {
    return static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  });
  return result;
}

std::string join_uints(const std::vector<std::uint64_t>& values) {
  std::string text;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) text += ',';
    text += std::to_string(values[i]);
  }
  return text;
}

// Splits "a,b,c" and parses every element with `parse_one`; all-or-nothing.
template <typename ParseOne>
std::string assign_list(std::string_view text, std::vector<std::uint64_t>* out, ParseOne parse_one,
                        std::string_view what) {
  constexpr std::size_t kMaxListElements = 64;
  std::vector<std::uint64_t> parsed;
  std::size_t start = 0;
  while (true) {
    if (parsed.size() == kMaxListElements) return "too many list elements (max 64)";
    const std::size_t comma = text.find(',', start);
    const std::string_view element = text.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    std::uint64_t value = 0;
    if (!parse_one(element, &value)) {
      return "expected a comma-separated list of " + std::string(what) + ", got '" +
             std::string(text) + "'";
    }
    parsed.push_back(value);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  *out = std::move(parsed);
  return "";
}

enum class NumberParse { kOk, kMalformed, kTooLarge };

// Like parse_uint/parse_bytes, but tells a well-formed number that does not fit 64 bits (a range
// error for the user) from junk.
NumberParse parse_number(std::string_view text, bool bytes, std::uint64_t* out) {
  if (bytes ? parse_bytes(text, out) : parse_uint(text, out)) return NumberParse::kOk;
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0) return NumberParse::kMalformed;
  std::uint64_t ignored = 0;
  const std::string_view suffix = text.substr(digits);
  // Digits that alone overflow, or digits times a valid suffix that overflows.
  const bool suffix_ok =
      suffix.empty() || (bytes && parse_bytes("1" + std::string(suffix), &ignored));
  return suffix_ok ? NumberParse::kTooLarge : NumberParse::kMalformed;
}

// 65536 -> "64KiB", 1 -> "1", 1000 -> "1000": the largest binary unit that divides `bytes`, so the
// text can be typed back as a flag value.
std::string bytes_flag_text(std::uint64_t bytes) {
  static constexpr struct {
    const char* suffix;
    unsigned shift;
  } kUnits[] = {{"GiB", 30}, {"MiB", 20}, {"KiB", 10}};
  for (const auto& unit : kUnits) {
    const std::uint64_t size = std::uint64_t{1} << unit.shift;
    if (bytes >= size && bytes % size == 0) return std::to_string(bytes / size) + unit.suffix;
  }
  return std::to_string(bytes);
}

}  // namespace

bool parse_uint(std::string_view text, std::uint64_t* out) {
  if (text.empty()) return false;
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, 10);
  if (ec != std::errc() || end != text.data() + text.size()) return false;
  *out = value;
  return true;
}

bool parse_bytes(std::string_view text, std::uint64_t* out) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  std::uint64_t number = 0;
  if (!parse_uint(text.substr(0, digits), &number)) return false;
  const std::string suffix = lower(text.substr(digits));
  std::uint64_t multiplier = 1;
  if (suffix.empty() || suffix == "b") {
    multiplier = 1;
  } else if (suffix == "k" || suffix == "kib" || suffix == "kb") {
    multiplier = std::uint64_t{1} << 10;
  } else if (suffix == "m" || suffix == "mib" || suffix == "mb") {
    multiplier = std::uint64_t{1} << 20;
  } else if (suffix == "g" || suffix == "gib" || suffix == "gb") {
    multiplier = std::uint64_t{1} << 30;
  } else {
    return false;
  }
  if (number > std::numeric_limits<std::uint64_t>::max() / multiplier) return false;
  *out = number * multiplier;
  return true;
}

bool parse_double(std::string_view text, double* out) {
  if (text.empty()) return false;
  const std::string copy(text);  // strtod needs a terminated string
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(copy.c_str(), &end);
  if (errno != 0 || end != copy.c_str() + copy.size() || !std::isfinite(value)) return false;
  *out = value;
  return true;
}

std::string format_bytes(std::uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  constexpr std::size_t kUnitCount = sizeof(kUnits) / sizeof(kUnits[0]);
  double scaled = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (scaled >= 1024.0 && unit + 1 < kUnitCount) {
    scaled /= 1024.0;
    ++unit;
  }
  std::ostringstream text;
  if (unit == 0) {
    text << bytes << " B";
  } else {
    text.precision(scaled < 10.0 ? 2 : (scaled < 100.0 ? 1 : 0));
    text << std::fixed << scaled << ' ' << kUnits[unit];
  }
  return text.str();
}

FlagSet::FlagSet(std::string command_path, std::string summary)
    : command_path_(std::move(command_path)), summary_(std::move(summary)) {}

void FlagSet::add(Flag flag) {
  assert(!flag.name.empty() && flag.name.rfind("--", 0) != 0 &&
         "register flags without the leading --");
  assert(find(flag.name) == nullptr && "flag registered twice");
  assert(flags_.size() < kMaxFlagsPerCommand);
  flags_.push_back(std::move(flag));
}

void FlagSet::string_flag(std::string name, std::string* value, std::string value_name,
                          std::string help) {
  assert(value != nullptr);
  add(Flag{std::move(name), std::move(value_name), std::move(help), *value, false, false,
           [value](std::string_view text) -> std::string {
             if (text.empty()) return "expects a non-empty value";
             *value = std::string(text);
             return "";
           },
           ""});
}

void FlagSet::add_ranged(std::string name, std::string value_name, std::string help,
                         std::uint64_t default_value, bool bytes, UintRange range,
                         std::uint64_t type_max, std::function<void(std::uint64_t)> store) {
  range.max = std::min(range.max, type_max);
  assert(range.min <= range.max && "empty flag range");
  auto number_text = [bytes](std::uint64_t number) {
    return bytes ? bytes_flag_text(number) : std::to_string(number);
  };
  const std::string range_text = number_text(range.min) + ".." + number_text(range.max);
  const bool narrower_than_type = range.min != 0 || range.max != type_max;
  Flag flag{
      std::move(name),
      std::move(value_name),
      std::move(help),
      bytes ? format_bytes(default_value) : std::to_string(default_value),
      false,
      false,
      [bytes, range, range_text, store = std::move(store)](std::string_view text) -> std::string {
        std::uint64_t number = 0;
        const NumberParse parsed = parse_number(text, bytes, &number);
        if (parsed == NumberParse::kMalformed) {
          return bytes ? "expects a byte count such as 4096, 4KiB, 1MiB or 4GiB, got '" +
                             std::string(text) + "'"
                       : "expects an unsigned integer, got '" + std::string(text) + "'";
        }
        if (parsed == NumberParse::kTooLarge || number < range.min || number > range.max) {
          const std::string given =
              parsed == NumberParse::kOk && bytes && text != std::to_string(number)
                  ? "'" + std::string(text) + "' (" + std::to_string(number) + " bytes)"
                  : "'" + std::string(text) + "'";
          return "value " + given + " is out of range: allowed " + range_text;
        }
        store(number);
        return "";
      },
      narrower_than_type ? range_text : ""};
  add(std::move(flag));
}

void FlagSet::uint_flag(std::string name, std::uint64_t* value, std::string value_name,
                        std::string help, UintRange range) {
  assert(value != nullptr);
  add_ranged(std::move(name), std::move(value_name), std::move(help), *value, false, range,
             std::numeric_limits<std::uint64_t>::max(),
             [value](std::uint64_t number) { *value = number; });
}

void FlagSet::uint_flag(std::string name, std::uint32_t* value, std::string value_name,
                        std::string help, UintRange range) {
  assert(value != nullptr);
  // add_ranged caps the range at the type's maximum, so the cast below never drops bits.
  add_ranged(std::move(name), std::move(value_name), std::move(help), *value, false, range,
             std::numeric_limits<std::uint32_t>::max(),
             [value](std::uint64_t number) { *value = static_cast<std::uint32_t>(number); });
}

void FlagSet::bytes_flag(std::string name, std::uint64_t* value, std::string value_name,
                         std::string help, UintRange range) {
  assert(value != nullptr);
  add_ranged(std::move(name), std::move(value_name), std::move(help), *value, true, range,
             std::numeric_limits<std::uint64_t>::max(),
             [value](std::uint64_t number) { *value = number; });
}

void FlagSet::bytes_flag(std::string name, std::uint32_t* value, std::string value_name,
                         std::string help, UintRange range) {
  assert(value != nullptr);
  add_ranged(std::move(name), std::move(value_name), std::move(help), *value, true, range,
             std::numeric_limits<std::uint32_t>::max(),
             [value](std::uint64_t number) { *value = static_cast<std::uint32_t>(number); });
}

void FlagSet::host_port_flag(std::string name, std::string* value, std::string value_name,
                             std::string help, util::PortZero port_zero) {
  assert(value != nullptr);
  add(Flag{std::move(name), std::move(value_name), std::move(help), *value, false, false,
           [value, port_zero](std::string_view text) -> std::string {
             if (std::string problem = util::parse_host_port(text, port_zero, nullptr);
                 !problem.empty()) {
               return "value '" + std::string(text) + "' " + problem;
             }
             *value = std::string(text);
             return "";
           },
           ""});
}

void FlagSet::double_flag(std::string name, double* value, std::string value_name,
                          std::string help) {
  assert(value != nullptr);
  std::ostringstream default_text;
  default_text << *value;
  add(Flag{
      std::move(name), std::move(value_name), std::move(help), default_text.str(), false, false,
      [value](std::string_view text) -> std::string {
        return parse_double(text, value) ? "" : "expects a number, got '" + std::string(text) + "'";
      },
      ""});
}

void FlagSet::uint_list_flag(std::string name, std::vector<std::uint64_t>* value,
                             std::string value_name, std::string help) {
  assert(value != nullptr);
  add(Flag{std::move(name), std::move(value_name), std::move(help), join_uints(*value), false,
           false,
           [value](std::string_view text) {
             return assign_list(text, value, parse_uint, "unsigned integers");
           },
           ""});
}

void FlagSet::bytes_list_flag(std::string name, std::vector<std::uint64_t>* value,
                              std::string value_name, std::string help) {
  assert(value != nullptr);
  add(Flag{std::move(name), std::move(value_name), std::move(help), join_uints(*value), false,
           false,
           [value](std::string_view text) {
             return assign_list(text, value, parse_bytes, "byte counts");
           },
           ""});
}

void FlagSet::bool_flag(std::string name, bool* value, std::string help) {
  assert(value != nullptr);
  add(Flag{std::move(name), "", std::move(help), "", false, false,
           [value](std::string_view text) -> std::string {
             if (text == "true" || text == "1") {
               *value = true;
             } else if (text == "false" || text == "0") {
               *value = false;
             } else {
               return "expects true or false, got '" + std::string(text) + "'";
             }
             return "";
           },
           ""});
}

void FlagSet::require(std::string_view name) {
  Flag* flag = find(name);
  // Always checked (not an assert): a Release build would otherwise write through a null pointer.
  RAFTLOG_CHECK(flag != nullptr, "require() of an unregistered flag");
  flag->required = true;
}

FlagSet::Flag* FlagSet::find(std::string_view name) {
  for (Flag& flag : flags_) {
    if (flag.name == name) return &flag;
  }
  return nullptr;
}

const FlagSet::Flag* FlagSet::find(std::string_view name) const {
  for (const Flag& flag : flags_) {
    if (flag.name == name) return &flag;
  }
  return nullptr;
}

bool FlagSet::was_set(std::string_view name) const {
  const Flag* flag = find(name);
  return flag != nullptr && flag->seen;
}

ParseStatus FlagSet::parse(std::span<const std::string> args) {
  error_.clear();
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    if (arg == "-h" || arg == "--help") return ParseStatus::kHelp;
    if (arg.rfind("--", 0) != 0 || arg.size() == 2) {
      error_ = "unexpected argument '" + std::string(arg) + "'";
      return ParseStatus::kError;
    }
    std::string_view name = arg.substr(2);
    std::string_view inline_value;
    bool has_inline_value = false;
    if (const std::size_t equals = name.find('='); equals != std::string_view::npos) {
      inline_value = name.substr(equals + 1);
      name = name.substr(0, equals);
      has_inline_value = true;
    }
    Flag* flag = find(name);
    if (flag == nullptr) {
      error_ = "unknown flag '--" + std::string(name) + "'";
      return ParseStatus::kError;
    }
    if (flag->seen) {
      error_ = "flag '--" + flag->name + "' given more than once";
      return ParseStatus::kError;
    }
    flag->seen = true;
    std::string_view value;
    if (has_inline_value) {
      value = inline_value;
    } else if (flag->value_name.empty()) {
      value = "true";  // a bare boolean flag
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      error_ = "flag '--" + flag->name + "' needs a value (" + flag->value_name + ")";
      return ParseStatus::kError;
    }
    if (std::string problem = flag->assign(value); !problem.empty()) {
      error_ = "flag '--" + flag->name + "' " + problem;
      return ParseStatus::kError;
    }
  }
  // Every missing one at once: a first run without flags learns the whole minimal command line.
  std::vector<std::string> missing;
  for (const Flag& flag : flags_) {
    if (flag.required && !flag.seen)
      missing.push_back("'--" + flag.name + " " + flag.value_name + "'");
  }
  if (!missing.empty()) {
    error_ = missing.size() == 1 ? "missing required flag " : "missing required flags ";
    for (std::size_t i = 0; i < missing.size(); ++i) error_ += (i == 0 ? "" : ", ") + missing[i];
    return ParseStatus::kError;
  }
  return ParseStatus::kOk;
}

std::string FlagSet::usage() const {
  std::ostringstream text;
  text << "Usage: " << command_path_;
  for (const Flag& flag : flags_) {
    if (flag.required) text << " --" << flag.name << ' ' << flag.value_name;
  }
  if (std::any_of(flags_.begin(), flags_.end(), [](const Flag& flag) { return !flag.required; })) {
    text << " [flags]";
  }
  text << "\n\n" << summary_ << "\n\nFlags:\n";
  std::size_t width = 0;
  auto left_column = [](const Flag& flag) {
    return "--" + flag.name + (flag.value_name.empty() ? "" : " " + flag.value_name);
  };
  for (const Flag& flag : flags_) width = std::max(width, left_column(flag).size());
  for (const Flag& flag : flags_) {
    const std::string left = left_column(flag);
    text << "  " << left << std::string(width - left.size() + 2, ' ') << flag.help;
    // A help text that explains its own default ("(default: the local cluster's)") is not followed
    // by the variable's initial value as a second default.
    const bool help_names_default = flag.help.find("(default") != std::string::npos;
    if (flag.required) {
      text << " (required)";
    } else if (help_names_default) {
      if (!flag.range_text.empty()) text << " (" << flag.range_text << ")";
    } else if (!flag.range_text.empty()) {
      text << " (" << flag.range_text << ", default " << flag.default_text << ")";
    } else if (!flag.default_text.empty()) {
      text << " (default " << flag.default_text << ")";
    }
    text << '\n';
  }
  text << "  -h, --help" << std::string(width > 8 ? width - 8 : 2, ' ') << "show this help\n";
  return text.str();
}

}  // namespace raftlog::cli
