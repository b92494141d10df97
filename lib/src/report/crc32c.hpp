// CRC-32C (Castagnoli), the checksum TFRecord framing uses, and TensorFlow's "masked" form of it.
// A plain table-driven software implementation: event files are written a few hundred bytes per
// log step, so SSE4.2's crc32 instruction would buy nothing worth its portability cost.
#pragma once

#include <cstdint>
#include <string_view>

namespace genesis::report {

// CRC-32C of `bytes` (reflected polynomial 0x82F63B78, initial and final xor 0xFFFFFFFF):
// crc32c("123456789") == 0xE3069283.
std::uint32_t crc32c(std::string_view bytes);

// TensorFlow masks stored CRCs so that a CRC computed over bytes that themselves hold CRCs stays
// well distributed: rotate right by 15 and add a constant.
std::uint32_t mask_crc(std::uint32_t crc);
std::uint32_t masked_crc32c(std::string_view bytes);

}  // namespace genesis::report
