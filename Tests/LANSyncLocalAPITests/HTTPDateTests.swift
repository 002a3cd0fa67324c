import Foundation
import Testing

@testable import LANSyncLocalAPI

/// The API's `Date` header is made per response (no timer), so its format is ours to get right.
@Suite struct HTTPDateTests {
    @Test func theFormatIsRFC9110sIMFFixdate() {
        // RFC 9110 §5.6.7's own example.
        #expect(HTTPDate.format(784_111_777) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(HTTPDate.format(0) == "Thu, 01 Jan 1970 00:00:00 GMT")
    }

    @Test func nowIsThisSecond() throws {
        let before = Int(Date().timeIntervalSince1970)
        let text = HTTPDate.now()
        let after = Int(Date().timeIntervalSince1970)
        #expect((before...after).map(HTTPDate.format).contains(text))
    }
}
