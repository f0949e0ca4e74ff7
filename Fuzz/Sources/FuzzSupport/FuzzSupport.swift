import CLibFuzzer
import Foundation

/// Hands the command line to libFuzzer's driver, which runs `testOneInput` as `LLVMFuzzerTestOneInput`.
///
/// SwiftPM gives every executable target a `main` of its own, so libFuzzer's `main` is never linked; each
/// fuzzer's `main.swift` calls this instead. All libFuzzer flags work as usual.
public func runLibFuzzer(_ testOneInput: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt) -> Never {
    var argumentCount = CommandLine.argc
    var arguments: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
    exit(LLVMFuzzerRunDriver(&argumentCount, &arguments, testOneInput))
}

/// Reports a violated property as a crash, so libFuzzer saves the input. Unlike `precondition`, the message
/// survives `-O`.
public func check(
    _ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String, file: StaticString = #fileID,
    line: UInt = #line
) {
    if !condition() { fatalError("property violated: " + message(), file: file, line: line) }
}

/// `text` quoted, with every scalar outside printable ASCII written `\u{...}`, so a report shows it exactly.
public func escaped(_ text: some StringProtocol) -> String {
    let scalars = text.unicodeScalars.map { scalar in
        (0x20..<0x7F).contains(scalar.value) && scalar != "\\" && scalar != "\""
            ? String(scalar) : "\\u{\(String(scalar.value, radix: 16))}"
    }
    return "\"" + scalars.joined() + "\""
}

/// Reports a violated property as a crash, so libFuzzer saves the input.
public func fail(_ message: String, file: StaticString = #fileID, line: UInt = #line) -> Never {
    fatalError("property violated: " + message, file: file, line: line)
}
