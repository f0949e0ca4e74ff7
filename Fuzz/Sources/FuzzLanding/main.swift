import FuzzSupport

runLibFuzzer { data, size in fuzzLanding(data, size) }
