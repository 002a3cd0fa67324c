import LANSyncCore
import Testing

@Suite struct CompactJSONTests {
    @Test(arguments: [
        ("{ \"a\" : 1 }", "{\"a\":1}"),
        ("[1, 2.50, -0.5e+3, true, false, null]", "[1,2.50,-0.5e+3,true,false,null]"),
        ("\"keep  inner   spaces\"", "\"keep  inner   spaces\""),
        ("{\"esc\": \"quote \\\" slash \\\\ \\u00e9 \\n\"}", "{\"esc\":\"quote \\\" slash \\\\ \\u00e9 \\n\"}"),
        ("\n 42 \t", "42"),
        ("{\"b\":2,\"a\":1}", "{\"b\":2,\"a\":1}"),
        ("\"ünïcødé ✓\"", "\"ünïcødé ✓\""),
        ("[]", "[]"),
        ("{}", "{}"),
    ])
    func validJSONIsCompactedWithoutRewritingTokens(input: String, expected: String) throws {
        #expect(try CompactJSON.compact(input).get() == expected)
        #expect(CompactJSON.isCompact(expected))
    }

    @Test(arguments: [
        "", "   ", "{", "}", "[1,]", "{\"a\"}", "{\"a\":}", "{a:1}", "'single'", "01", "1.", ".5", "1e", "-",
        "tru", "nul", "\"unterminated", "\"bad \\x escape\"", "\"\\u12\"", "\"tab\there\"", "1 2", "{\"a\":1}}",
        "[" + String(repeating: "[", count: 80) + String(repeating: "]", count: 81),
    ])
    func invalidJSONIsRefused(input: String) {
        #expect(throws: CompactJSON.Problem.self) { try CompactJSON.compact(input).get() }
    }

    @Test func problemsSayWhereAndWhat() throws {
        guard case .failure(let problem) = CompactJSON.compact("{\"a\": tru}") else {
            Issue.record("accepted invalid JSON")
            return
        }
        #expect(problem.offset == 6)
        #expect(problem.description.contains("expected 'true'"))
    }

    @Test func deltasCarryingInvalidPayloadsAreRejected() {
        let replica = ReplicaID(high: 1, low: 1)
        let device = DeviceID(bytes: [UInt8](repeating: 1, count: 16))!
        let entry = Entry(
            id: "e", stream: "taps", originDevice: device, dot: Dot(replica: replica, counter: 1),
            hlc: HybridTimestamp(physicalMilliseconds: 1, logical: 0), wallMilliseconds: 1, payload: "{ \"not\": compact")
        let delta = Delta(entries: [entry], coverage: [.init(replica: replica, from: 0, through: 1)])
        #expect(delta.problem()?.contains("payload") == true)
    }
}
