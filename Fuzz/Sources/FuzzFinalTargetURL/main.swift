import FuzzSupport

runLibFuzzer { data, size in fuzzFinalTargetURL(data, size) }
