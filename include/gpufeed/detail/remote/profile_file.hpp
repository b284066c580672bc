// gpufeed — the AWS shared credentials and config files (INI), read the way the AWS CLI and SDKs
// read them.
//
// The format, as the SDKs' shared profile-file rules give it:
//   - "[name]" opens a section ("[default]", "[dev]"; in the config file "[profile dev]"),
//     whitespace inside the brackets trimmed;
//   - "name = value" sets a property of the current section; names are compared without case,
//     values are trimmed; a later setting of the same name wins;
//   - a line whose first non-blank character is '#' or ';' is a comment, and so is the rest of a
//     line after a '#' or ';' that follows whitespace ("aws_region = eu-west-1  # work");
//   - an indented line after "s3 =" (no value) sets the sub-property "s3.<name>"; an indented
//     line after a property with a value continues that value on a new line;
//   - a property before any section is ignored.
// Messages about a file name the file and a line number, never a line's text: a line can hold a
// secret.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "gpufeed/detail/unique_handle.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::detail::remote {

// Properties of one section: lower-cased name (or "parent.name") to value.
using profile_properties = std::map<std::string, std::string>;

// One profile file as read.
struct profile_file {
  std::string path;     // as opened, for messages
  bool exists = false;  // false: there was no file at path (not an error: the files are optional)
  std::map<std::string, profile_properties> sections;  // by trimmed section name

  // The section named exactly `name`, or nullptr.
  [[nodiscard]] const profile_properties* section(const std::string& name) const {
    const auto it = sections.find(name);
    return it == sections.end() ? nullptr : &it->second;
  }
};

[[nodiscard]] inline std::string_view trim_blanks(std::string_view s) noexcept {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// `s` without a trailing comment: from the first '#' or ';' that follows a blank.
[[nodiscard]] inline std::string_view strip_inline_comment(std::string_view s) noexcept {
  for (std::size_t i = 1; i < s.size(); ++i)
    if ((s[i] == '#' || s[i] == ';') && std::isspace(static_cast<unsigned char>(s[i - 1])))
      return s.substr(0, i);
  return s;
}

// A section name with its inner whitespace collapsed ("profile   dev" is "profile dev").
[[nodiscard]] inline std::string collapse_blanks(std::string_view s) {
  std::string out;
  bool blank = false;
  for (const char c : trim_blanks(s)) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      blank = true;
      continue;
    }
    if (blank && !out.empty()) out += ' ';
    blank = false;
    out += c;
  }
  return out;
}

// Parses the text of a profile file; config_error naming `path` and the line number for a line
// that is neither blank, a comment, a section header nor a property.
[[nodiscard]] inline profile_file parse_profile_file(std::string_view text, std::string path) {
  profile_file f;
  f.path = std::move(path);
  f.exists = true;
  profile_properties* current = nullptr;
  std::string last_name;    // the property an indented line continues
  bool last_empty = false;  // whether that property was written without a value
  std::size_t line_no = 0;
  auto malformed = [&](const std::string& why) {
    throw config_error("malformed AWS profile file: line " + std::to_string(line_no) + " " + why,
                       file_context(f.path));
  };
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    std::string_view raw = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    ++line_no;
    if (!raw.empty() && raw.back() == '\r') raw.remove_suffix(1);
    const std::string_view line = trim_blanks(raw);
    if (line.empty() || line.front() == '#' || line.front() == ';') continue;
    const bool indented = std::isspace(static_cast<unsigned char>(raw.front()));
    if (line.front() == '[') {
      const std::string_view header = trim_blanks(strip_inline_comment(line));
      if (header.size() < 2 || header.back() != ']' || header.find(']') != header.size() - 1)
        malformed("is a section header without its closing ']'");
      const std::string name = collapse_blanks(header.substr(1, header.size() - 2));
      if (name.empty()) malformed("names an empty section");
      current = &f.sections[name];
      last_name.clear();
      continue;
    }
    if (indented && current && !last_name.empty()) {
      const std::string_view body = trim_blanks(strip_inline_comment(line));
      if (last_empty) {
        const std::size_t eq = body.find('=');
        if (eq == std::string_view::npos) malformed("is an indented line without '='");
        std::string sub;
        for (const char c : trim_blanks(body.substr(0, eq)))
          sub += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        (*current)[last_name + "." + sub] = std::string(trim_blanks(body.substr(eq + 1)));
      } else {
        (*current)[last_name] += "\n" + std::string(body);
      }
      continue;
    }
    const std::size_t eq = line.find('=');
    if (eq == std::string_view::npos)
      malformed("is neither a section header, a property (name = value) nor a comment");
    const std::string_view name = trim_blanks(line.substr(0, eq));
    if (name.empty()) malformed("sets a property without a name");
    if (!current) continue;  // before any section: ignored, as the SDKs do
    last_name.clear();
    for (const char c : name)
      last_name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const std::string_view value = trim_blanks(strip_inline_comment(line.substr(eq + 1)));
    last_empty = value.empty();
    (*current)[last_name] = std::string(value);
  }
  return f;
}

// Closes a descriptor this header opened.
struct profile_fd_close {
  static constexpr int null = -1;
  void operator()(int fd) const noexcept { ::close(fd); }
};

// Reads and parses the profile file at `path`. No file there (ENOENT, ENOTDIR) is not an error:
// the result says !exists. config_error naming the file when it cannot be read (permissions, a
// directory, an I/O error; errno in status) or is malformed.
[[nodiscard]] inline profile_file read_profile_file(const std::string& path) {
  profile_file missing;
  missing.path = path;
  unique_handle<int, profile_fd_close> fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd.valid()) {
    const int e = errno;
    if (e == ENOENT || e == ENOTDIR) return missing;
    throw config_error("cannot read AWS profile file", os_call_context(path, "open", e));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    const int e = errno;
    throw config_error("cannot read AWS profile file", os_call_context(path, "fstat", e));
  }
  if (!S_ISREG(st.st_mode))
    throw config_error("cannot read AWS profile file: not a regular file", file_context(path));
  std::string text;
  char buf[4096];
  while (true) {
    const ssize_t got = ::read(fd.get(), buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      const int e = errno;
      throw config_error("cannot read AWS profile file", os_call_context(path, "read", e));
    }
    if (got == 0) break;
    text.append(buf, static_cast<std::size_t>(got));
  }
  return parse_profile_file(text, path);
}

}  // namespace gpufeed::detail::remote
