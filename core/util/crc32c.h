// CRC-32C (Castagnoli): the SSE4.2 crc32 instruction where the CPU has it, else
// table-driven software (slicing-by-8); both give the same values. Used for every
// checksum in the data file. crc32c_extend() continues a running checksum so a
// body made of several pieces can be checksummed without copying.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace q4m {

uint32_t crc32c_extend(uint32_t crc, const void* data, size_t size);
uint32_t crc32c_extend_portable(uint32_t crc, const void* data, size_t size);  // software only
inline uint32_t crc32c(const void* data, size_t size) { return crc32c_extend(0, data, size); }
inline uint32_t crc32c(std::string_view s) { return crc32c(s.data(), s.size()); }

}  // namespace q4m
