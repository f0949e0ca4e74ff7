import Testing

@testable import LinkRelayServer

@Suite("The Date header of the relay's own answers", .timeLimit(.minutes(1)))
struct HTTPDateTests {
    @Test("IMF-fixdate, as RFC 9110 writes its example")
    func format() {
        #expect(HTTPDate.format(784_111_777) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(HTTPDate.format(0) == "Thu, 01 Jan 1970 00:00:00 GMT")
        #expect(HTTPDate.format(951_865_509) == "Tue, 29 Feb 2000 23:05:09 GMT")
    }
}
