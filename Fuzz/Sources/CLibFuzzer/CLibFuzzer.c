// Only the declaration in include/CLibFuzzer.h is needed; libFuzzer itself comes with -sanitize=fuzzer.
#include "CLibFuzzer.h"
