import Foundation
import LANSyncCore
import LANSyncTestSupport
import LANSyncWire
import PropertyBased
import Testing

@Suite struct DeltaCodingTests {
    /// Any delta from generated histories survives encoding exactly.
    @Test func generatedDeltasRoundTrip() async {
        await propertyCheck(input: Gen.int(in: 0...10_000).array(of: 0...60)) { operations in
            let s = Scenario(operations: operations)
            for delta in s.deltas {
                let decoded = try? WireMessage.decode(WireMessage.delta(delta.withTestSignatures).encoded())
                #expect(decoded == .delta(delta.withTestSignatures))
            }
        }
    }

    /// A delta of app-table row changes: every kind, value type and key shape.
    static func rowDelta(_ seeds: [Int]) -> Delta {
        let replica = ReplicaID(high: 3, low: 4)
        func value(_ seed: Int) -> SQLValue {
            switch seed % 6 {
            case 0: return .null
            case 1: return .integer(Int64(truncatingIfNeeded: seed &* -7_919))
            case 2: return .realBits(UInt64(truncatingIfNeeded: seed) &* 0x9E37_79B9_7F4A_7C15)
            case 3: return .text(String(repeating: "é\u{0}a", count: seed % 5))
            case 4: return .blob((0..<(seed % 9)).map { UInt8(truncatingIfNeeded: $0 &* seed) })
            default: return .real(-0.0)
            }
        }
        let rows = seeds.enumerated().map { index, seed -> RowChange in
            let kind = RowChange.Kind(rawValue: UInt8(1 + seed % 4))!
            let life: UInt64 = kind == .append ? 1 : kind == .delete ? 2 : 3
            let columns = kind == .delete ? 0 : seed % 4
            return RowChange(
                key: RowKey(
                    table: ["athletes", "sessions"][seed % 2],
                    primaryKey: (0...(seed % 3)).map { value(seed + $0) }
                ),
                kind: kind,
                causalLength: life,
                hlc: HybridTimestamp(rawValue: UInt64(seed) << 20),
                dot: Dot(replica: replica, counter: UInt64(index + 1)),
                values: (0..<columns).map { .init(column: "c\($0)", value: value(seed / 7 + $0)) },
                totals: kind == .update && seed % 5 == 0 ? [.init(column: "xp", total: Int64(seed) - 500)] : []
            )
        }
        return Delta(
            rows: rows,
            coverage: rows.isEmpty ? [] : [.init(replica: replica, from: 0, through: UInt64(rows.count))]
        )
    }

    @Test func rowChangesRoundTripExactly() async {
        await propertyCheck(input: Gen.int(in: 0...100_000).array(of: 0...40)) { seeds in
            let delta = Self.rowDelta(seeds)
            #expect(delta.problem() == nil)
            let decoded = try? WireMessage.decode(WireMessage.delta(delta.withTestSignatures).encoded())
            #expect(decoded == .delta(delta.withTestSignatures))
        }
    }

    /// A delta with version 4's signed section (signatures, geneses, preference stubs, lost cells)
    /// survives encoding exactly; without the section the same bytes decode to the unsigned delta.
    static func signedDelta(_ seeds: [Int]) -> Delta {
        var delta = rowDelta(seeds)
        let replica = ReplicaID(high: 3, low: 4)
        for index in delta.coverage.indices {
            delta.coverage[index].signature = (0..<64).map { UInt8(truncatingIfNeeded: $0 &+ seeds.count) }
            if seeds.count % 2 == 0 {
                delta.coverage[index].genesis = .init(counter: 0, signature: [UInt8](repeating: 7, count: 64))
            }
        }
        for (index, seed) in seeds.enumerated() where seed % 3 == 0 {
            let change = delta.rows[index]
            guard change.kind != .delete, change.kind != .append else { continue }
            delta.lostCells[change.dot] = [
                .init(
                    kind: .value,
                    column: "lost\(seed % 4)",
                    standIn: (0..<(seed % 33)).map { UInt8(truncatingIfNeeded: $0 &* seed) }
                ),
                .init(kind: .total, column: "xp\(seed % 2)", standIn: [UInt8](repeating: UInt8(seed % 256), count: 8)),
            ]
        }
        if !delta.coverage.isEmpty {
            delta.preferenceStubs = seeds.prefix(3).enumerated().map { index, seed in
                PreferenceStub(
                    key: "theme/\(seed % 5)",
                    hlc: HybridTimestamp(rawValue: UInt64(seed) << 18),
                    dot: Dot(replica: replica, counter: UInt64(index + 1)),
                    elementHash: [UInt8](repeating: UInt8(seed % 256), count: 32)
                )
            }
        }
        return delta
    }

    @Test func signedSectionsRoundTripExactly() async throws {
        await propertyCheck(input: Gen.int(in: 0...100_000).array(of: 0...40)) { seeds in
            let delta = Self.signedDelta(seeds)
            #expect(delta.problem() == nil)
            var writer = ByteWriter(capacity: 64)
            DeltaCoding.encode(delta, into: &writer, signed: true)
            var reader = ByteReader(writer.bytes)
            #expect((try? DeltaCoding.decode(from: &reader, signed: true)) == delta)
            #expect(reader.remaining == 0)
        }
        // The section follows the rows; each number in it is checked where it is read.
        let replica = ReplicaID(high: 3, low: 4)
        let change = RowChange(
            key: RowKey(table: "athletes", primaryKey: [.integer(1)]),
            kind: .update,
            causalLength: 1,
            hlc: HybridTimestamp(rawValue: 5),
            dot: Dot(replica: replica, counter: 1),
            values: [.init(column: "c0", value: .integer(2))]
        )
        var one = Delta(
            rows: [change],
            coverage: [.init(replica: replica, from: 0, through: 1, signature: [UInt8](repeating: 1, count: 64))]
        )
        one.lostCells[change.dot] = [.init(kind: .total, column: "c0", standIn: [UInt8](repeating: 2, count: 8))]
        var plainWriter = ByteWriter(capacity: 64)
        DeltaCoding.encode(one, into: &plainWriter)
        var signedWriter = ByteWriter(capacity: 64)
        DeltaCoding.encode(one, into: &signedWriter, signed: true)
        let section = plainWriter.bytes.count
        #expect(signedWriter.bytes.starts(with: plainWriter.bytes))
        // signature (64) · genesis flag · stub count · list count · row index · cell count · kind · column · length · 8 bytes
        #expect(signedWriter.bytes.count == section + 64 + 8 + 8)
        for (offset, value, why) in [
            (64, UInt8(2), "genesis flag 2"), (67, 1, "row index past the rows"), (68, 0, "an empty list"),
            (69, 3, "cell kind 3"), (70, 1, "a column not in the table"), (71, 9, "a total's stand-in of 9 bytes"),
        ] {
            var bytes = signedWriter.bytes
            bytes[section + offset] = value
            var reader = ByteReader(bytes)
            #expect(throws: WireError.self, "\(why)") { _ = try DeltaCoding.decode(from: &reader, signed: true) }
        }
        let delta = Self.signedDelta([3, 6, 9])
        var writer = ByteWriter(capacity: 64)
        DeltaCoding.encode(delta, into: &writer, signed: true)
        let bytes = writer.bytes
        var unsignedReader = ByteReader(bytes)
        #expect(throws: WireError.self) {
            _ = try DeltaCoding.decode(from: &unsignedReader, signed: false).entries
            try unsignedReader.expectEnd("delta")
        }
        var plain = ByteWriter(capacity: 64)
        DeltaCoding.encode(delta, into: &plain)
        var truncated = ByteReader(plain.bytes)
        #expect(throws: WireError.self) { _ = try DeltaCoding.decode(from: &truncated, signed: true) }
    }

    /// A one-column update costs its value plus a few dozen bytes (the issue's goal: value + 64).
    @Test func aOneColumnUpdateIsSmall() throws {
        let change = RowChange(
            key: RowKey(table: "rowing_sessions", primaryKey: [.text("3f2a9c1e-7b7d-4c1e-9a55-0c7c2f1e8d10")]),
            kind: .update,
            causalLength: 1,
            hlc: HybridTimestamp(physicalMilliseconds: 1_700_000_000_000, logical: 3),
            dot: Dot(replica: ReplicaID(high: 9, low: 9), counter: 123_456),
            values: [.init(column: "notes", value: .text("strong finish"))]
        )
        let delta = Delta(
            rows: [change],
            coverage: [.init(replica: change.dot.replica, from: 123_455, through: 123_456)]
        )
        let bytes = WireMessage.delta(delta.withTestSignatures).encoded()
        // The key (36) and the table's and column's names travel too; the rest is framing, and
        // the signed section: the range's signature (64), no genesis, no stubs, no lost cells (3).
        #expect(delta.signedSectionBytes == 64 + 3)
        #expect(
            bytes.count <= "strong finish".utf8.count + 36 + "rowing_sessions".utf8.count + "notes".utf8.count + 64 + 64
                + 3
        )
    }

    @Test func otherMessagesRoundTrip() throws {
        let state = PeerState(
            versionVector: VersionVector([ReplicaID(high: 1, low: 2): 7, ReplicaID(high: 3, low: 4): Dot.maxCounter]),
            digest: StateDigest(bytes: [UInt8](repeating: 9, count: 32))!,
            hlc: HybridTimestamp(rawValue: 12345)
        )
        for message in [
            WireMessage.state(state), .ping(42), .pong(.max), .goodbye(code: .clockSkew, reason: "ahead 10 min"),
        ] {
            #expect(try WireMessage.decode(message.encoded()) == message)
        }
        let hello = Hello(
            version: 1,
            device: DeviceID(bytes: [UInt8](repeating: 1, count: 16))!,
            name: "therapy-room",
            replica: ReplicaID(high: 5, low: 6),
            hlc: HybridTimestamp(rawValue: 99),
            wallMilliseconds: 1_700_000_000_000
        )
        #expect(try Hello.decode(hello.encoded()) == hello)
        // This build speaks 5 only: a peer of version 2 or 3 (unsigned changes), or 4 (which keeps
        // appended rows a cascade deleted), is refused.
        #expect(try VersionOffer.decode(VersionOffer().encoded()).agreed() == 5)
        #expect(VersionOffer(versions: 2...6).agreed() == 5)
        #expect(VersionOffer(versions: 2...4).agreed() == nil)
        #expect(VersionOffer(versions: 1...1).agreed() == nil)
        #expect(VersionOffer(versions: 6...7).agreed() == nil)
        for message in [
            WireMessage.resend(ReplicaID(high: 7, low: 8), after: 0),
            .resend(ReplicaID(high: 7, low: 8), after: Dot.maxCounter),
        ] {
            #expect(try WireMessage.decode(message.encoded()) == message)
        }
        // A resend past the counter range is malformed.
        var beyond = ByteWriter()
        beyond.byte(9)
        beyond.raw(ReplicaID(high: 7, low: 8).bytes)
        beyond.varint(Dot.maxCounter + 1)
        #expect(throws: WireError.self) { try WireMessage.decode(beyond.bytes) }
    }

    /// Generated ids travel as 16 bytes; other ids as text; both come back exactly.
    @Test func entryIDsAreCompactAndExact() throws {
        let device = DeviceID(bytes: [UInt8](repeating: 1, count: 16))!
        let replica = ReplicaID(high: 1, low: 1)
        func entry(_ id: String, _ counter: UInt64) -> Entry {
            Entry(
                id: id,
                stream: "taps",
                originDevice: device,
                dot: Dot(replica: replica, counter: counter),
                hlc: HybridTimestamp(physicalMilliseconds: 1_700_000_000_000, logical: UInt16(counter)),
                wallMilliseconds: 1_700_000_000_000,
                payload: "{}"
            )
        }
        let uuid = EntryIDs.make(hlc: HybridTimestamp(physicalMilliseconds: 1_700_000_000_000, logical: 0))
        let delta = Delta(
            entries: [entry(uuid, 1), entry("session-am", 2), entry(uuid.uppercased(), 3)],
            coverage: [.init(replica: replica, from: 0, through: 3)]
        )
        #expect(
            try WireMessage.decode(WireMessage.delta(delta.withTestSignatures).encoded())
                == .delta(delta.withTestSignatures)
        )
        // Near misses travel as text and come back exactly as they were.
        let nearMisses = [
            "0190a1b2-c3d4-7e5f-8a6b-7c8d9e0f1a2g", "0190a1b2+c3d4-7e5f-8a6b-7c8d9e0f1a2b",
            "0190a1b2-c3d4-7e5f-8a6b7-c8d9e0f1a2b", "0190a1b2-c3d4-7e5f-8a6b-7c8d9e0f1a2/",
            "{190a1b2-c3d4-7e5f-8a6b-7c8d9e0f1a2b",
        ]
        let misses = Delta(
            entries: nearMisses.enumerated().map { entry($1, UInt64($0 + 1)) },
            coverage: [.init(replica: replica, from: 0, through: UInt64(nearMisses.count))]
        )
        #expect(
            try WireMessage.decode(WireMessage.delta(misses.withTestSignatures).encoded())
                == .delta(misses.withTestSignatures)
        )
        // A generated id costs 16 bytes; a 36-character text id costs 37 (length + characters).
        func size(_ id: String) -> Int {
            WireMessage.delta(Delta(entries: [entry(id, 1)], coverage: [.init(replica: replica, from: 0, through: 1)]))
                .encoded().count
        }
        #expect(size(String(repeating: "x", count: 36)) - size(uuid) == 21)
        // The 16 bytes are the UUID's hex digits in order (protocol §5), pinned for other peers.
        let pinned = "0190a1b2-c3d4-7e5f-8a6b-7c8d9e0f1a2b"
        let bytes = WireMessage.delta(
            Delta(entries: [entry(pinned, 1)], coverage: [.init(replica: replica, from: 0, through: 1)])
        )
        .encoded()
        let expected: [UInt8] = [
            0x01, 0x90, 0xA1, 0xB2, 0xC3, 0xD4, 0x7E, 0x5F, 0x8A, 0x6B, 0x7C, 0x8D, 0x9E, 0x0F, 0x1A, 0x2B,
        ]
        #expect((0...(bytes.count - 16)).contains { Array(bytes[$0..<($0 + 16)]) == expected })
    }

    @Test func hostileInputsAreRefusedNotTrusted() {
        // Every prefix of a valid message is refused, never a crash.
        let s = Scenario(operations: Array(0..<40).map { $0 * 37 })
        let encoded = WireMessage.delta(s.deltas.last!).encoded()
        for length in 0..<encoded.count {
            #expect(throws: WireError.self) { try WireMessage.decode(Array(encoded.prefix(length))) }
        }
        // A count far beyond what was sent is refused before anything is allocated for it.
        var huge = ByteWriter()
        huge.byte(2)
        huge.varint(0)  // coverage
        huge.varint(0)  // replicas
        huge.varint(0)  // devices
        huge.varint(0)  // streams
        huge.varint(UInt64.max)  // entries
        #expect(throws: WireError.self) { try WireMessage.decode(huge.bytes) }
        #expect(throws: WireError.self) { try WireMessage.decode([2] + [UInt8](repeating: 0xFF, count: 11)) }
        #expect(throws: WireError.self) { try WireMessage.decode([99]) }
        #expect(throws: WireError.self) { try WireMessage.decode(WireMessage.ping(1).encoded() + [0]) }
    }

    @Test func largeMessagesTravelCompressedAndSmallOnesPlain() throws {
        var big = Delta()
        let replica = ReplicaID(high: 9, low: 9)
        let device = DeviceID(bytes: [UInt8](repeating: 2, count: 16))!
        for counter in 1...200 {
            big.entries.append(
                Entry(
                    id: "tap-\(counter)",
                    stream: "symbol_taps",
                    originDevice: device,
                    dot: Dot(replica: replica, counter: UInt64(counter)),
                    hlc: HybridTimestamp(physicalMilliseconds: 1_700_000_000_000, logical: UInt16(counter)),
                    wallMilliseconds: 1_700_000_000_000,
                    payload:
                        "{\"symbol_id\":\(counter % 40),\"label\":\"more please\",\"category_path\":[\"core\",\"food\"]}"
                )
            )
        }
        big.coverage = [.init(replica: replica, from: 0, through: 200)]
        let message = WireMessage.delta(big.withTestSignatures)
        let wire = message.wireBytes()
        #expect(wire.first == 6)
        #expect(wire.count * 3 < message.encoded().count)
        #expect(try WireMessage.decode(wire) == message)
        #expect(WireMessage.ping(1).wireBytes() == WireMessage.ping(1).encoded())
    }

    @Test func compressionCannotBeTurnedIntoABomb() throws {
        let plain = WireMessage.ping(7).encoded()
        func packed(declaring length: Int, _ content: [UInt8]) -> [UInt8] {
            var writer = ByteWriter()
            writer.byte(6)
            writer.varint(length)
            writer.raw(WireTesting.compress(content))
            return writer.bytes
        }
        #expect(try WireMessage.decode(packed(declaring: plain.count, plain)) == .ping(7))
        // Inflating to more than declared, or less, is refused; so is a claim beyond the limit.
        let zeros = [UInt8](repeating: 0, count: 1_000_000)
        #expect(throws: WireError.self) { try WireMessage.decode(packed(declaring: 1_000, zeros)) }
        #expect(throws: WireError.self) { try WireMessage.decode(packed(declaring: plain.count + 1, plain)) }
        #expect(throws: WireError.self) { try WireMessage.decode(packed(declaring: 5 * 1024 * 1024, plain)) }
        // Bytes that are no compressed data at all, or a frame cut short, are refused.
        var garbage = ByteWriter()
        garbage.byte(6)
        garbage.varint(plain.count)
        garbage.raw([0x28, 0xB5, 0x2F, 0xFD, 0x01, 0x02, 0x03])
        #expect(throws: WireError.self) { try WireMessage.decode(garbage.bytes) }
        let whole = packed(declaring: zeros.count, zeros)
        #expect(throws: WireError.self) { try WireMessage.decode(Array(whole.dropLast(3))) }
        // Compression inside compression is refused.
        let inner = packed(declaring: plain.count, plain)
        #expect(throws: WireError.self) { try WireMessage.decode(packed(declaring: inner.count, inner)) }
    }

    @Test func framesSplitAndReassembleWithinLimits() throws {
        let message = (0..<200_000).map { UInt8(truncatingIfNeeded: $0) }
        let chunks = Framing.chunks(of: message)
        #expect(chunks.count == 4)
        #expect(chunks.allSatisfy { $0.count <= Framing.maxChunkBytes + 1 })
        var reassembler = Framing.Reassembler()
        var result: [UInt8]?
        for chunk in chunks { result = try reassembler.add(chunk) }
        #expect(result == message)
        var small = Framing.Reassembler(maxMessageBytes: 100_000)
        #expect(throws: WireError.self) { for chunk in chunks { _ = try small.add(chunk) } }
        var bad = Framing.Reassembler()
        #expect(throws: WireError.self) { try bad.add([7, 1, 2]) }
    }
}

/// The fuzz corpus in Fuzz/corpus/wire: seeds of every message kind, replayed through the same
/// checks the fuzzer makes (LANSYNC_WRITE_SEEDS=DIR writes them afresh).
@Suite struct FuzzCorpusTests {
    static let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../Fuzz/corpus/wire").standardizedFileURL

    static func seeds() -> [String: [UInt8]] {
        let s = Scenario(operations: Array(0..<30).map { $0 * 53 })
        let hello = Hello(
            version: 2,
            device: DeviceID(bytes: [UInt8](repeating: 1, count: 16))!,
            name: "home",
            replica: ReplicaID(high: 1, low: 2),
            hlc: HybridTimestamp(rawValue: 1 << 40),
            wallMilliseconds: 1 << 40
        )
        return [
            "delta": WireMessage.delta(s.deltas.last!).encoded(),
            "delta-small": WireMessage.delta(s.deltas.first { !$0.entries.isEmpty } ?? s.deltas[0]).encoded(),
            "state": WireMessage.state(
                PeerState(versionVector: s.replicas[0].versionVector, digest: s.replicas[0].digest, hlc: .zero)
            ).encoded(),
            "ping": WireMessage.ping(7).encoded(),
            "goodbye": WireMessage.goodbye(code: .clockSkew, reason: "clock skew").encoded(),
            "hello": hello.encoded(),
            "offer": VersionOffer().encoded(),
            "json": Array("{\"symbol_id\":12,\"grid\":[2,3],\"label\":\"more\"}".utf8),
            "compressed": WireMessage.delta(s.deltas.last!).wireBytes(),
            "delta-rows": WireMessage.delta(DeltaCodingTests.rowDelta(Array(0..<24).map { $0 * 37 })).encoded(),
            // Signatures, geneses, a replica record, preference stubs and lost cells.
            "delta-signed": {
                var delta = DeltaCodingTests.signedDelta(Array(0..<12).map { $0 * 3 })
                delta.coverage[0].record =
                    #"{"device_id":"AEAQCAI-BAEAQCA-AIBAEAQ-CAIBAEC","signature":"c2ln","signing_key":"00"}"#
                return WireMessage.delta(delta).encoded()
            }(),
            "push": {
                var encoder = EntryPushEncoder()
                let entry = Entry(
                    id: "0190a1b2-c3d4-7e5f-8a6b-7c8d9e0f1a2b",
                    stream: "symbol_taps",
                    originDevice: DeviceID(bytes: [UInt8](repeating: 1, count: 16))!,
                    dot: Dot(replica: ReplicaID(high: 1, low: 2), counter: 5),
                    hlc: HybridTimestamp(rawValue: 1 << 40),
                    wallMilliseconds: 1 << 24,
                    payload: #"{"symbol_id":12}"#
                )
                return WireMessage.push(encoder.push(entry, signature: testSignature, digestImplied: true)!).encoded()
            }(),
            "resend": WireMessage.resend(ReplicaID(high: 1, low: 2), after: 300).encoded(),
            "records": WireMessage.records([
                PreferenceWrite(
                    key: "lansync/seen/a/b",
                    value: "{}",
                    originDevice: DeviceID(bytes: [UInt8](repeating: 1, count: 16))!,
                    dot: Dot(replica: ReplicaID(high: 1, low: 2), counter: 3),
                    hlc: HybridTimestamp(rawValue: 1 << 40),
                    wallMilliseconds: 1 << 24
                )
            ]).encoded(),
            "row-push": {
                var encoder = RowPushEncoder()
                let change = RowPushTests.update(
                    RowPushTests.a,
                    3,
                    key: "3f2a9c1e-7b7d-4c1e-9a55-0c7c2f1e8d10",
                    column: "notes",
                    value: .text("ok"),
                    ms: 1 << 40
                )
                return WireMessage.rowPush(encoder.push(change, signature: testSignature, digestCheck: 7)!).encoded()
            }(),
        ]
    }

    @Test func corpusHoldsEverySeedAndReplaysCleanly() throws {
        if let directory = ProcessInfo.processInfo.environment["LANSYNC_WRITE_SEEDS"] {
            for (name, bytes) in Self.seeds() {
                try Data(bytes).write(to: URL(fileURLWithPath: directory).appendingPathComponent("seed-\(name)"))
            }
        }
        let files = try FileManager.default.contentsOfDirectory(atPath: Self.corpus.path)
        #expect(Set(Self.seeds().keys.map { "seed-\($0)" }).isSubset(of: Set(files)))
        for file in files {
            WireFuzzing.check([UInt8](try Data(contentsOf: Self.corpus.appendingPathComponent(file))))
        }
    }
}

@Suite struct EntryPushTests {
    static let device = DeviceID(bytes: [UInt8](repeating: 7, count: 16))!

    static func entry(_ replica: ReplicaID, _ counter: UInt64, stream: String = "symbol_taps", ms: UInt64) -> Entry {
        Entry(
            id: "01a1fd27-062e-7\(String(format: "%03x", counter % 4096))-b84a-5046c97fba88",
            stream: stream,
            originDevice: device,
            dot: Dot(replica: replica, counter: counter),
            hlc: HybridTimestamp(rawValue: ms << 16 | counter % 3),
            wallMilliseconds: Int64(ms) + 1,
            payload: #"{"symbol_id":12,"label":"more"}"#
        )
    }

    /// A stream of pushes through the wire comes back as the same entries, interleaving replicas
    /// and streams; after the first, a push costs about 30 bytes beyond its payload.
    @Test func pushesRoundTripThroughTheirTables() throws {
        var encoder = EntryPushEncoder()
        var decoder = EntryPushDecoder()
        let a = ReplicaID(high: 1, low: 1)
        let b = ReplicaID(high: 2, low: 2)
        var sizes = [Int]()
        for (index, (replica, stream)) in [
            (a, "taps"), (a, "taps"), (b, "taps"), (a, "phrases"), (b, "phrases"), (a, "taps"),
        ]
        .enumerated() {
            let entry = Self.entry(
                replica,
                UInt64(100_000 + index),
                stream: stream,
                ms: 1_795_248_555_566 + UInt64(index) * 1_500
            )
            let pushMade = encoder.push(entry, signature: testSignature, digestImplied: index % 2 == 0)
            let push = try #require(pushMade)
            let bytes = WireMessage.push(push).wireBytes()
            guard case .push(let decoded) = try WireMessage.decode(bytes) else {
                Issue.record("not a push")
                return
            }
            #expect(decoded == push)
            #expect(try decoder.entry(from: decoded) == entry)
            sizes.append(bytes.count - entry.payload.utf8.count)
        }
        // 30 bytes of framing, and the writer's signature of its head (64).
        #expect(sizes.last! <= 30 + 64, "a steady-state push: \(sizes)")
    }

    @Test func slotsMustBeDefinedInOrderBeforeUse() throws {
        var encoder = EntryPushEncoder()
        let firstMade = encoder.push(
            Self.entry(ReplicaID(high: 1, low: 1), 1, ms: 1_000),
            signature: testSignature,
            digestImplied: false
        )
        let first = try #require(firstMade)
        let secondMade = encoder.push(
            Self.entry(ReplicaID(high: 1, low: 1), 2, ms: 1_001),
            signature: testSignature,
            digestImplied: false
        )
        let second = try #require(secondMade)
        var fresh = EntryPushDecoder()
        #expect(throws: WireError.self) { try fresh.entry(from: second) }  // names slot 0 before it is defined
        var skipping = first
        skipping.replicaSlot = 3
        var other = EntryPushDecoder()
        #expect(throws: WireError.self) { try other.entry(from: skipping) }  // defines slot 3 first
        var zero = first
        zero.counterStep = 0
        var third = EntryPushDecoder()
        #expect(throws: WireError.self) { try third.entry(from: zero) }  // counter 0 is no dot
    }

    @Test func everyTruncationOfAPushIsRefused() throws {
        var encoder = EntryPushEncoder()
        let pushMade = encoder.push(
            Self.entry(ReplicaID(high: 1, low: 1), 5, ms: 1_000),
            signature: testSignature,
            digestImplied: true
        )
        let push = try #require(pushMade)
        let bytes = WireMessage.push(push).encoded()
        for length in 0..<bytes.count {
            #expect(throws: WireError.self) { try WireMessage.decode(Array(bytes.prefix(length))) }
        }
    }
}

@Suite struct RowPushTests {
    static let a = ReplicaID(high: 1, low: 1)
    static let b = ReplicaID(high: 2, low: 2)

    static func update(
        _ replica: ReplicaID,
        _ counter: UInt64,
        key: String,
        column: String,
        value: SQLValue,
        ms: UInt64
    ) -> RowChange {
        RowChange(
            key: RowKey(table: "rowing_sessions", primaryKey: [.text(key)]),
            kind: .update,
            causalLength: 1,
            hlc: HybridTimestamp(physicalMilliseconds: ms, logical: 0),
            dot: Dot(replica: replica, counter: counter),
            values: [.init(column: column, value: value)]
        )
    }

    /// Any sequence of row changes (every kind, value type and key shape) comes back exactly
    /// through a connection's encoder and decoder, each push through the wire's bytes.
    @Test func rowChangesRoundTripThroughTheirTables() async {
        await propertyCheck(input: Gen.int(in: 0...100_000).array(of: 1...30)) { seeds in
            var encoder = RowPushEncoder()
            var decoder = RowPushDecoder()
            for (index, change) in DeltaCodingTests.rowDelta(seeds).rows.enumerated() {
                let push = encoder.push(
                    change,
                    signature: testSignature,
                    digestCheck: index % 2 == 0 ? UInt64(index) << 40 : nil
                )
                guard let push,
                    case .rowPush(let decoded) = try? WireMessage.decode(WireMessage.rowPush(push).wireBytes())
                else {
                    Issue.record("change \(index) did not travel as a row push")
                    return
                }
                #expect(decoded == push)
                #expect((try? decoder.change(from: decoded)) == change)
                #expect(RowPush.delta(carrying: change, signature: testSignature).problem() == nil)
            }
        }
    }

    /// The issue's goal: a one-column update of a UUID-keyed row on the wire, frame (3 bytes) and
    /// AEAD tag (16) included, within the value + 64 bytes once the session's slots are defined,
    /// plus the writer's 64-byte signature (version 4).
    @Test func aOneColumnUpdateFitsItsGoal() throws {
        var encoder = RowPushEncoder()
        let note = SQLValue.text("strong finish, +2.5")
        var sizes = [Int]()
        for (index, key) in ["3f2a9c1e-7b7d-4c1e-9a55-0c7c2f1e8d10", "3f2a9c1e-7b7d-4c1e-9a55-0c7c2f1e8d11"]
            .enumerated()
        {
            let change = Self.update(
                Self.a,
                UInt64(5_000 + index),
                key: key,
                column: "notes",
                value: note,
                ms: 1_795_248_555_566 + UInt64(index) * 1_000
            )
            let pushMade = encoder.push(change, signature: testSignature, digestCheck: 0x0123_4567_89AB_CDEF)
            let push = try #require(pushMade)
            sizes.append(WireMessage.rowPush(push).wireBytes().count + 19)
        }
        // The value + 64 bytes, and the writer's signature of its head (64).
        #expect(sizes[1] <= 19 + 64 + 64, "steady-state row push: \(sizes)")
        #expect(sizes[0] > sizes[1], "the first push defines the slots: \(sizes)")
    }

    @Test func slotsMustBeDefinedInOrderBeforeUse() throws {
        var encoder = RowPushEncoder()
        let key = "3f2a9c1e-7b7d-4c1e-9a55-0c7c2f1e8d10"
        let firstMade = encoder.push(
            Self.update(Self.a, 1, key: key, column: "notes", value: .null, ms: 1_000),
            signature: testSignature,
            digestCheck: nil
        )
        let secondMade = encoder.push(
            Self.update(Self.a, 2, key: key, column: "notes", value: .null, ms: 1_001),
            signature: testSignature,
            digestCheck: nil
        )
        let first = try #require(firstMade)
        let second = try #require(secondMade)
        #expect(first.replica == .define(0, Self.a) && second.replica == .slot(0))
        var fresh = RowPushDecoder()
        #expect(throws: WireError.self) { try fresh.change(from: second) }  // names slot 0 before it is defined
        var skipping = first
        skipping.table = .define(3, "rowing_sessions")
        var other = RowPushDecoder()
        #expect(throws: WireError.self) { try other.change(from: skipping) }  // defines slot 3 first
        var zero = first
        zero.counterStep = 0
        var third = RowPushDecoder()
        #expect(throws: WireError.self) { try third.change(from: zero) }  // counter 0 is no dot
        var wrapping = second
        wrapping.counterStep = Int64(Dot.maxCounter)  // 1 + (2^40 − 1) is past the counter range
        var fourth = RowPushDecoder()
        _ = try fourth.change(from: first)
        #expect(throws: WireError.self) { try fourth.change(from: wrapping) }
    }

    @Test func slotsBeyondTheLimitAndUnknownFlagsAreMalformed() throws {
        var encoder = RowPushEncoder()
        let pushMade = encoder.push(
            Self.update(Self.a, 1, key: "k", column: "notes", value: .integer(1), ms: 1_000),
            signature: testSignature,
            digestCheck: nil
        )
        let push = try #require(pushMade)
        var beyond = push
        beyond.replica = .slot(WireProtocol.maxTableEntries)
        #expect(throws: WireError.self) { try WireMessage.decode(WireMessage.rowPush(beyond).encoded()) }
        var flagged = WireMessage.rowPush(push).encoded()
        flagged[1] |= 0x80
        #expect(throws: WireError.self) { try WireMessage.decode(flagged) }
    }

    @Test func everyTruncationOfARowPushIsRefused() throws {
        var encoder = RowPushEncoder()
        let pushMade = encoder.push(
            Self.update(
                Self.b,
                9,
                key: "3f2a9c1e-7b7d-4c1e-9a55-0c7c2f1e8d10",
                column: "stroke_rate",
                value: .real(31.5),
                ms: 1_000
            ),
            signature: testSignature,
            digestCheck: 42
        )
        let bytes = WireMessage.rowPush(try #require(pushMade)).encoded()
        for length in 0..<bytes.count {
            #expect(throws: WireError.self) { try WireMessage.decode(Array(bytes.prefix(length))) }
        }
    }

    /// A table full of slots makes the encoder say "send a delta" and leaves its tables unchanged.
    @Test func aFullTableFallsBackToADelta() throws {
        var encoder = RowPushEncoder()
        for counter in 1...UInt64(WireProtocol.maxTableEntries) {
            let made = encoder.push(
                Self.update(Self.a, counter, key: "k", column: "c\(counter)", value: .null, ms: 1_000),
                signature: testSignature,
                digestCheck: nil
            )
            #expect(made != nil)
        }
        #expect(
            encoder.push(
                Self.update(Self.a, 5_000, key: "k", column: "one_too_many", value: .null, ms: 1_000),
                signature: testSignature,
                digestCheck: nil
            ) == nil
        )
        // Known columns still go as pushes.
        #expect(
            encoder.push(
                Self.update(Self.a, 5_001, key: "k", column: "c7", value: .null, ms: 1_000),
                signature: testSignature,
                digestCheck: nil
            ) != nil
        )
    }
}
