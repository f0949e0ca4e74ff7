#ifndef LINKRELAY_CLIBFUZZER_H
#define LINKRELAY_CLIBFUZZER_H

#include <stddef.h>
#include <stdint.h>

/// libFuzzer's driver (LLVM 11 and later), called from a fuzzer's own `main`. SwiftPM gives every executable
/// target a `main` of its own, so the fuzzers cannot use libFuzzer's: theirs hands over to this instead.
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

#endif
