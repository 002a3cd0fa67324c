import LANSyncCore
import LANSyncCrypto
import LANSyncPairing
import LANSyncTestSupport
import LANSyncWire
import Testing

/// Pairing by short code: both machines, message by message, as the agent and the CLI run them
/// over TCP — what a right code, a wrong code, a meddler and a broken message each do.
@Suite struct PairingTests {
    static let inviterDevice = DeviceID(bytes: [UInt8](repeating: 1, count: 16))!
    static let joinerDevice = DeviceID(bytes: [UInt8](repeating: 2, count: 16))!
    static let secret = SecureBytes(copying: (0..<32).map { UInt8($0) })

    /// Runs a whole exchange, every message through its bytes; returns both outcomes.
    static func run(
        inviterCode: String,
        joinerCode: String,
        records: [PreferenceWrite] = []
    ) throws
        -> (inviter: PairingOutcome?, joiner: PairingOutcome?)
    {
        var inviter = PairingInviter(
            code: inviterCode,
            secret: secret,
            records: records,
            device: inviterDevice,
            name: "home-desktop"
        )
        var joiner = try PairingJoiner(code: joinerCode, device: joinerDevice, name: "therapy-room")
        var toInviter: PairingMessage? = joiner.hello
        var outcomes: (inviter: PairingOutcome?, joiner: PairingOutcome?) = (nil, nil)
        while let message = toInviter {
            toInviter = nil
            let step = inviter.receive(try PairingMessage.decode(message.encoded()))
            if let outcome = step.outcome { outcomes.inviter = outcome }
            guard let reply = step.send else { break }
            let back = joiner.receive(try PairingMessage.decode(reply.encoded()))
            if let outcome = back.outcome { outcomes.joiner = outcome }
            toInviter = back.send
        }
        return outcomes
    }

    /// A member record as the inviter's store holds one: `number` picks its key, replica and size.
    static func record(_ number: Int, valueBytes: Int = 40) -> PreferenceWrite {
        PreferenceWrite(
            key: "lansync/seen/\(number)/by",
            value: "{\"name\":\"" + String(repeating: "x", count: valueBytes) + "\"}",
            originDevice: inviterDevice,
            dot: Dot(replica: ReplicaID(high: 1, low: UInt64(number % 3)), counter: UInt64(number + 1)),
            hlc: HybridTimestamp(physicalMilliseconds: 1_700_000_000_000 + UInt64(number), logical: 0),
            wallMilliseconds: 1_700_000_000_000 + Int64(number)
        )
    }

    @Test func theRightCodeHandsOverTheSecretAndTheMemberRecordsAndBothSidesSeeEachOther() throws {
        let records = (0..<5).map { Self.record($0) }
        let (inviter, joiner) = try Self.run(inviterCode: "48213907", joinerCode: "48213907", records: records)
        #expect(inviter == .invited(PairedDevice(device: Self.joinerDevice, name: "therapy-room")))
        #expect(
            joiner
                == .joined(
                    secret: (0..<32).map { UInt8($0) },
                    records: records,
                    inviter: PairedDevice(device: Self.inviterDevice, name: "home-desktop")
                )
        )
    }

    /// A group whose records outgrow a welcome (64 KiB) sends the first that fit, in its order;
    /// the rest reach the newcomer by sync.
    @Test func recordsPastTheWelcomesSizeAreLeftToSync() throws {
        let records = (0..<400).map { Self.record($0, valueBytes: 200) }
        let (_, joiner) = try Self.run(inviterCode: "48213907", joinerCode: "48213907", records: records)
        guard case .joined(_, let received, _)? = joiner else {
            Issue.record("expected a join, got \(String(describing: joiner))")
            return
        }
        #expect(received.count > 100 && received.count < records.count, "\(received.count)")
        #expect(received == Array(records.prefix(received.count)))
        let fits = WelcomeRecords.encode(records, within: PairingInviter.recordBytes)
        #expect(fits.count == received.count && fits.bytes.count <= PairingInviter.recordBytes)
    }

    /// What a welcome's records may hold: one preference under lansync/ per delta, covering its
    /// own dot and no other; anything else is refused (and with it the whole welcome).
    @Test func recordsThatAreNotOneMemberRecordEachDoNotRead() throws {
        let good = Self.record(1)
        #expect(try WelcomeRecords.decode(WelcomeRecords.encode([good], within: 1_000).bytes) == [good])
        func encoded(_ delta: Delta) -> [UInt8] {
            let message = WireMessage.delta(delta).encoded()
            var writer = ByteWriter()
            writer.varint(message.count)
            writer.raw(message)
            return writer.bytes
        }
        let app = PreferenceWrite(
            key: "controls/slider",
            value: "1",
            originDevice: good.originDevice,
            dot: good.dot,
            hlc: good.hlc,
            wallMilliseconds: good.wallMilliseconds
        )
        let bad: [(String, [UInt8])] = [
            ("an app preference", encoded(Delta.carrying(app))),
            (
                "coverage past its dot",
                encoded(Delta(preferences: [good], coverage: [.init(replica: good.dot.replica, from: 0, through: 9)]))
            ),
            (
                "two records in one delta",
                encoded(
                    Delta(
                        preferences: [good, Self.record(4)],
                        coverage: [.init(replica: good.dot.replica, from: 1, through: 5)]
                    )
                )
            ),
            ("a length past the end", [0x7F, 1, 2]),
        ]
        for (what, bytes) in bad {
            #expect(throws: WireError.self, "\(what)") { try WelcomeRecords.decode(bytes) }
        }
    }

    @Test func aWrongCodeFailsOnBothSidesAndMovesNoSecret() throws {
        let (inviter, joiner) = try Self.run(inviterCode: "48213907", joinerCode: "48213908")
        guard case .failed(_, let joinerWrong)? = joiner, case .failed(_, let inviterWrong)? = inviter else {
            Issue.record("both sides must fail: \(String(describing: inviter)), \(String(describing: joiner))")
            return
        }
        #expect(joinerWrong && inviterWrong)
    }

    /// Someone who answers a joiner in the inviter's place, without the code, cannot confirm, and
    /// a joiner that skips a step or replays one is refused.
    @Test func messagesOutOfTurnOrForgedAreRefused() throws {
        var joiner = try PairingJoiner(code: "48213907", device: Self.joinerDevice, name: "t")
        let mallory = try CPaceParty(
            role: .responder,
            code: Array("00000000".utf8),
            channel: [],
            session: [1],
            associatedData: []
        )
        let forged = joiner.receive(
            .reply(
                element: mallory.element,
                device: Self.inviterDevice,
                name: "mallory",
                confirmation: [UInt8](repeating: 7, count: 32)
            )
        )
        #expect(forged.outcome.map { if case .failed(_, true) = $0 { true } else { false } } == true)
        var inviter = PairingInviter(code: "48213907", secret: Self.secret, device: Self.inviterDevice, name: "h")
        let early = inviter.receive(.confirm(confirmation: [UInt8](repeating: 0, count: 32)))
        #expect(early.send == .refused(reason: "the joining device sent a message out of turn"))
        // After the end, nothing more happens.
        #expect(inviter.receive(joiner.hello).send == nil)
    }

    /// Whether a `refused` means a wrong code follows from where it comes (in answer to the
    /// reply, or to the confirm), never from its words: a closed window's refusal that mentions
    /// the code does not end a joiner's search, and a check that failed with any wording does.
    @Test func aRefusalMeansAWrongCodeByWhereItComesNotByItsWords() throws {
        func wrongCode(_ step: PairingStep) -> Bool? {
            if case .failed(_, let wrongCode) = step.outcome { wrongCode } else { nil }
        }
        // The joiner: refused at once (the hello's answer), then refused in answer to its confirm.
        var early = try PairingJoiner(code: "48213907", device: Self.joinerDevice, name: "t")
        #expect(wrongCode(early.receive(.refused(reason: "the window closed: the code was used"))) == false)
        var inviter = PairingInviter(code: "48213907", secret: Self.secret, device: Self.inviterDevice, name: "h")
        var joiner = try PairingJoiner(code: "48213907", device: Self.joinerDevice, name: "t")
        let reply = try #require(inviter.receive(joiner.hello).send)
        #expect(joiner.receive(reply).send != nil, "the joiner confirms")
        #expect(wrongCode(joiner.receive(.refused(reason: "no"))) == true)
        // The inviter: refused before any hello, then refused in answer to its reply.
        var waiting = PairingInviter(code: "48213907", secret: Self.secret, device: Self.inviterDevice, name: "h")
        #expect(wrongCode(waiting.receive(.refused(reason: "wrong code"))) == false)
        var replied = PairingInviter(code: "48213907", secret: Self.secret, device: Self.inviterDevice, name: "h")
        _ = replied.receive(try PairingJoiner(code: "48213907", device: Self.joinerDevice, name: "t").hello)
        #expect(wrongCode(replied.receive(.refused(reason: "no"))) == true)
    }

    @Test func aWindowClosesAfterThreeRunsOrWhenItExpiresOrOnceSomeoneJoined() {
        var window = PairingWindow(code: "4821-3907", openedAt: 1_000, minutes: 5)
        #expect(window.closedReason(now: 1_000) == nil)
        // Runs take their attempt when they start: three at once use up the window.
        for _ in 0..<3 {
            let started = window.startRun(now: 2_000)
            #expect(started)
        }
        let fourth = window.startRun(now: 2_000)
        #expect(!fourth)
        #expect(window.closedReason(now: 2_000)?.contains("3 attempts") == true)
        window.finishRun(.failed(reason: "the code did not match", wrongCode: true))
        window.finishRun(nil)
        #expect(window.failures == ["the code did not match", "the connection ended before the run did"])
        var expiring = PairingWindow(code: "1", openedAt: 1_000, minutes: 5)
        #expect(expiring.closedReason(now: 1_000 + 5 * 60_000)?.contains("expired") == true)
        let started = expiring.startRun(now: 1_000 + 5 * 60_000)
        #expect(!started)
        var used = PairingWindow(code: "1", openedAt: 0, minutes: 5)
        let first = used.startRun(now: 1)
        #expect(first)
        used.finishRun(.invited(PairedDevice(device: Self.joinerDevice, name: "therapy-room")))
        #expect(used.closedReason(now: 1)?.contains("therapy-room joined") == true)
        let again = used.startRun(now: 2)
        #expect(!again)
    }

    @Test func shortCodesAreEightDigitsWithAnyDashesOrSpaces() {
        let code = PairingCode.generate()
        #expect(code.count == 9 && code.contains("-"))
        #expect(PairingCode.parse(code)?.count == 8)
        #expect(PairingCode.parse("4821 3907") == "48213907")
        #expect(PairingCode.parse("4821-390") == nil)
        #expect(PairingCode.parse("1f4k3mq-9x2vb7c") == nil, "a full join code is not a short code")
    }

    /// Every message survives its encoding; malformed bytes are refused with a reason.
    @Test func messagesRoundTripAndMalformedOnesAreRefused() throws {
        let messages: [PairingMessage] = [
            .hello(
                session: [UInt8](repeating: 1, count: 16),
                element: [UInt8](repeating: 2, count: 32),
                device: Self.joinerDevice,
                name: "é"
            ),
            .reply(
                element: [UInt8](repeating: 3, count: 32),
                device: Self.inviterDevice,
                name: "home",
                confirmation: [UInt8](repeating: 4, count: 32)
            ),
            .confirm(confirmation: [UInt8](repeating: 5, count: 32)),
            .welcome(sealed: [UInt8](repeating: 6, count: 48)),
            .refused(reason: "the code did not match"),
        ]
        for message in messages {
            #expect(try PairingMessage.decode(message.encoded()) == message)
            // A welcome's sealed part runs to the end (the records make its length vary).
            if case .welcome = message { continue }
            #expect(throws: WireError.self) { try PairingMessage.decode(message.encoded() + [0]) }
            #expect(throws: WireError.self) { try PairingMessage.decode(Array(message.encoded().dropLast())) }
        }
        #expect(throws: WireError.self) { try PairingMessage.decode([4] + [UInt8](repeating: 6, count: 47)) }
        let largest = PairingMessage.welcome(sealed: [UInt8](repeating: 6, count: PairingMessage.maxWelcomeBytes - 1))
        #expect(try PairingMessage.decode(largest.encoded()) == largest)
        #expect(throws: WireError.self) { try PairingMessage.decode(largest.encoded() + [6]) }
        #expect(throws: WireError.self) { try PairingMessage.decode([9]) }
        #expect(throws: WireError.self) { try PairingMessage.decode([UInt8](repeating: 1, count: 2_000)) }
    }
}

/// The pairing fuzz check on generated inputs, so it runs in every test run (scripts/fuzz runs it
/// under libFuzzer for longer).
@Suite struct PairingFuzzingTests {
    @Test func randomMessagesNeverPairAndNeverCrash() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            let bytes = (0..<Int.random(in: 0...400, using: &generator)).map { _ in
                UInt8.random(in: 0...255, using: &generator)
            }
            PairingFuzzing.check(bytes)
        }
        // Well-formed messages too: a hello, a reply and a confirm with random contents.
        for kind: UInt8 in 1...5 {
            PairingFuzzing.check([64 | 0, kind] + [UInt8](repeating: 0x42, count: 63))
        }
    }
}
