import FuzzSupport

runLibFuzzer { data, size in fuzzSessionRequest(data, size) }
