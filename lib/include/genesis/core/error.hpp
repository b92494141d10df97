// The error hierarchy every layer throws. Messages carry their own context (file:line of the check,
// rank, op) so that cli/main.cpp can print one line and map the class to an exit code:
// usage/config errors -> 2, everything else -> 1. Library code never calls exit().
#pragma once

#include <source_location>
#include <stdexcept>
#include <string>

namespace genesis {

// What the CLI exits with when the user's input is wrong (a usage or configuration error).
inline constexpr int kUsageExitCode = 2;

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
  // Exit code the CLI maps this error to (2: the user's input is wrong; 1: something failed).
  virtual int exit_code() const { return 1; }
};

// Bad value handed to an API or a flag.
class InvalidArgument : public Error {
 public:
  using Error::Error;
  int exit_code() const override { return kUsageExitCode; }
};

// Bad configuration: unknown key, wrong type, bad value, malformed TOML.
class ConfigError : public Error {
 public:
  using Error::Error;
  int exit_code() const override { return kUsageExitCode; }
};

class IoError : public Error { public: using Error::Error; };
class Timeout : public Error { public: using Error::Error; };
class NotSupported : public Error { public: using Error::Error; };
class CudaError : public Error { public: using Error::Error; };
class NcclError : public Error { public: using Error::Error; };
class CommError : public Error { public: using Error::Error; };

namespace detail {
std::string where(const std::source_location& loc);
}  // namespace detail

}  // namespace genesis

// GENESIS_CHECK(cond, ExceptionType, message): throws ExceptionType("message (file:line)") when
// cond is false. The message is only built on failure.
#define GENESIS_CHECK(cond, Type, msg)                                                    \
  do {                                                                                    \
    if (!(cond)) [[unlikely]]                                                             \
      throw Type(std::string(msg) + " (" +                                                \
                 ::genesis::detail::where(std::source_location::current()) + ")");        \
  } while (0)
