import LANSyncCore
import PropertyBased
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
            id: "e",
            stream: "taps",
            originDevice: device,
            dot: Dot(replica: replica, counter: 1),
            hlc: HybridTimestamp(physicalMilliseconds: 1, logical: 0),
            wallMilliseconds: 1,
            payload: "{ \"not\": compact"
        )
        let delta = Delta(entries: [entry], coverage: [.init(replica: replica, from: 0, through: 1)])
        #expect(delta.problem()?.contains("payload") == true)
    }

    /// `isCompact` has its own validator, built for speed: it must say yes exactly where
    /// `compact` succeeds and changes nothing. Inputs are compact JSON values built from the
    /// generated numbers, half of them then broken by one inserted fragment.
    static let fragments = [
        "{", "}", "[", "]", ",", ":", "\"", "\"a\"", "1", "-", "0", ".", "e", "+", "true", "nul", " ", "\n",
        "\\", "\\u00e9", "\\u12", "\\x", "é", "\u{01}", "\u{1F}", "\t",
    ]

    /// A compact JSON value chosen by `picks` (read from `next` on, wrapping around).
    static func value(_ picks: [Int], _ next: inout Int, depth: Int = 0) -> String {
        func pick() -> Int {
            defer { next += 1 }
            return picks[next % picks.count]
        }
        let atoms = [
            "0", "-1", "2.5", "1e+3", "-0.5E-2", "10", "true", "false", "null",
            "\"\"", "\"abc\"", "\"é ü\"", "\"\\n\\t\"", "\"\\u00e9\"", "\"\\\"q\\\"\"", "\"a/b\"",
        ]
        let kind = pick() % 4
        guard depth < 4, kind >= 2 else { return atoms[pick() % atoms.count] }
        let count = pick() % 4
        let members = (0..<count).map { _ in
            kind == 2
                ? value(picks, &next, depth: depth + 1) : "\"k\(pick() % 3)\":" + value(picks, &next, depth: depth + 1)
        }
        return kind == 2 ? "[" + members.joined(separator: ",") + "]" : "{" + members.joined(separator: ",") + "}"
    }

    @Test func validatorAgreesWithTheParser() async {
        await propertyCheck(count: 5_000, input: Gen.int(in: 0...1_000).array(of: 3...40)) { picks in
            var next = 2
            var text = Self.value(picks, &next)
            if picks[0] % 2 == 1 {
                let bytes = Array(text.utf8)
                let at = picks[1] % (bytes.count + 1)
                text =
                    String(decoding: bytes[..<at], as: UTF8.self) + Self.fragments[picks[0] % Self.fragments.count]
                    + String(decoding: bytes[at...], as: UTF8.self)
            } else {
                #expect(CompactJSON.isCompact(text), "a built value is compact: \(text)")
            }
            let unchanged = (try? CompactJSON.compact(text).get()) == text
            #expect(CompactJSON.isCompact(text) == unchanged, "\(text)")
        }
    }

    @Test func nestingIsBoundedTheSameWay() {
        let deepest =
            String(repeating: "[", count: CompactJSON.maxDepth) + String(repeating: "]", count: CompactJSON.maxDepth)
        let tooDeep = "[" + deepest + "]"
        #expect(CompactJSON.isCompact(deepest))
        #expect(!CompactJSON.isCompact(tooDeep))
        #expect((try? CompactJSON.compact(tooDeep).get()) == nil)
        let objects =
            String(repeating: "{\"a\":", count: CompactJSON.maxDepth) + "1"
            + String(repeating: "}", count: CompactJSON.maxDepth)
        #expect(CompactJSON.isCompact(objects))
        #expect(!CompactJSON.isCompact("[" + objects + "]"))
    }
}
