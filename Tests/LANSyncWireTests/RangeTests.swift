import LANSyncCore
import LANSyncWire
import Testing

/// Every number read from the network is range-checked where it is decoded (protocol §4.1). Each
/// of the first three messages crashed every agent of a group (an arithmetic overflow trap) before
/// these checks; now each is malformed, so the agent says `goodbye(malformed)` and keeps serving.
@Suite struct WireRangeTests {
    static let replicaA = ReplicaID(high: 1, low: 1)
    static let replicaB = ReplicaID(high: 2, low: 2)
    static let device = DeviceID(bytes: [UInt8](repeating: 3, count: 16))!

    static func entry(counter: UInt64, wall: Int64 = 1_700_000_000_000) -> Entry {
        Entry(
            id: "tap-\(counter)",
            stream: "symbol_taps",
            originDevice: device,
            dot: Dot(replica: replicaA, counter: counter),
            hlc: HybridTimestamp(physicalMilliseconds: 1_700_000_000_000, logical: 0),
            wallMilliseconds: wall,
            payload: "{}"
        )
    }

    static func refused(_ bytes: [UInt8], saying fragment: String) {
        do {
            let message = try WireMessage.decode(bytes)
            Issue.record("decoded \(message) instead of refusing it")
        } catch {
            #expect(error.reason.contains(fragment), "\(error.reason)")
        }
    }

    /// A state whose version-vector counters summed past 2^64 trapped in the "who lacks what" sum.
    @Test func stateCountersAboveTheLimitAreMalformed() throws {
        let vector = VersionVector([Self.replicaA: .max, Self.replicaB: 1])
        let state = PeerState(versionVector: vector, digest: StateDigest(), hlc: .zero)
        Self.refused(WireMessage.state(state).encoded(), saying: "version vector counter")
        let justInside = PeerState(
            versionVector: VersionVector([Self.replicaA: Dot.maxCounter, Self.replicaB: Dot.maxCounter]),
            digest: StateDigest(),
            hlc: .zero
        )
        #expect(try WireMessage.decode(WireMessage.state(justInside).encoded()) == .state(justInside))
        let beyond = PeerState(
            versionVector: VersionVector([Self.replicaA: Dot.maxCounter + 1]),
            digest: StateDigest(),
            hlc: .zero
        )
        Self.refused(WireMessage.state(beyond).encoded(), saying: "version vector counter")
    }

    /// A state naming one replica twice is malformed (which counter would count?).
    @Test func stateNamingAReplicaTwiceIsMalformed() {
        var bytes: [UInt8] = [1, 2]  // state, two counters
        for _ in 0..<2 { bytes += Self.replicaA.bytes + [5] }
        bytes += [UInt8](repeating: 0, count: 32 + 8)
        Self.refused(bytes, saying: "twice")
    }

    /// A delta whose coverage ended at 2^63 trapped when the store packed it into a 64-bit key.
    @Test func coverageBeyondTheCounterLimitIsMalformed() throws {
        let hostile = Delta(
            entries: [Self.entry(counter: 1)],
            coverage: [.init(replica: Self.replicaA, from: 0, through: 1 << 63)]
        )
        Self.refused(WireMessage.delta(hostile).encoded(), saying: "coverage end")
        let start = Delta(coverage: [.init(replica: Self.replicaA, from: Dot.maxCounter + 1, through: .max)])
        Self.refused(WireMessage.delta(start).encoded(), saying: "coverage start")
        let empty = Delta(coverage: [.init(replica: Self.replicaA, from: 5, through: 5)])
        Self.refused(WireMessage.delta(empty).encoded(), saying: "empty")
        let row = Delta(
            entries: [Self.entry(counter: Dot.maxCounter + 1)],
            coverage: [.init(replica: Self.replicaA, from: 0, through: Dot.maxCounter)]
        )
        Self.refused(WireMessage.delta(row).encoded(), saying: "entry counter")
        let atLimit = Delta(
            entries: [Self.entry(counter: Dot.maxCounter)],
            coverage: [.init(replica: Self.replicaA, from: Dot.maxCounter - 1, through: Dot.maxCounter)]
        )
        #expect(
            try WireMessage.decode(WireMessage.delta(atLimit.withTestSignatures).encoded())
                == .delta(atLimit.withTestSignatures)
        )
    }

    /// A row's wall clock lies in 0…2^48 − 1 ms; the zigzag offset that carries it wraps modulo 2^64.
    @Test func wallClocksOutsideTheHLCRangeAreMalformed() throws {
        let coverage = [Delta.Coverage(replica: Self.replicaA, from: 0, through: 1)]
        for wall: Int64 in [-1, Int64(HybridTimestamp.maxPhysicalMilliseconds) + 1, .max, .min] {
            let delta = Delta(entries: [Self.entry(counter: 1, wall: wall)], coverage: coverage)
            Self.refused(WireMessage.delta(delta).encoded(), saying: "wall clock")
        }
        let edge = Delta(entries: [Self.entry(counter: 1, wall: 0)], coverage: coverage)
        #expect(
            try WireMessage.decode(WireMessage.delta(edge.withTestSignatures).encoded())
                == .delta(edge.withTestSignatures)
        )
    }

    /// A Hello whose wall clock was 2^63 or more trapped in the clock-skew subtraction.
    @Test func helloWallClockBeyondTheHLCRangeIsMalformed() throws {
        func hello(wall: UInt64, name: String = "home") -> Hello {
            Hello(
                version: 1,
                device: Self.device,
                name: name,
                replica: Self.replicaA,
                hlc: .zero,
                wallMilliseconds: wall
            )
        }
        for wall: UInt64 in [1 << 63, .max, HybridTimestamp.maxPhysicalMilliseconds + 1] {
            #expect(throws: WireError.self) { try Hello.decode(hello(wall: wall).encoded()) }
        }
        let edge = hello(wall: HybridTimestamp.maxPhysicalMilliseconds)
        #expect(try Hello.decode(edge.encoded()) == edge)
        // The name: 1–256 bytes of UTF-8 without control characters.
        for name in ["", "tab\there", String(repeating: "a", count: 257)] {
            #expect(throws: WireError.self) { try Hello.decode(hello(wall: 0, name: name).encoded()) }
        }
        #expect(try Hello.decode(hello(wall: 0, name: String(repeating: "é", count: 128)).encoded()).name.count == 128)
        // Version 0 is not a Hello: it is a version refusal.
        var zero = hello(wall: 0)
        zero.version = 0
        #expect(throws: WireError.self) { try Hello.decode(zero.encoded()) }
    }

    /// Flag bits the protocol does not define must be 0 (bit 1 of an entry's flags was ignored).
    @Test func unknownFlagBitsAreMalformed() throws {
        let coverage = [Delta.Coverage(replica: Self.replicaA, from: 0, through: 1)]
        let entry = WireMessage.delta(Delta(entries: [Self.entry(counter: 1)], coverage: coverage)).encoded()
        // Layout: type, replicas (1 + 16), devices (1 + 16), streams (1 + 1 + 11), no app tables,
        // no columns, entry count, then the entry's flags byte.
        let flagsAt = 1 + 17 + 17 + 13 + 1 + 1 + 1
        #expect(entry[flagsAt] == 0)
        for bit: UInt8 in [2, 4, 0x80] {
            var bytes = entry
            bytes[flagsAt] |= bit
            Self.refused(bytes, saying: "entry flags")
        }
        let write = PreferenceWrite(
            key: "caregiver/active",
            value: nil,
            originDevice: Self.device,
            dot: Dot(replica: Self.replicaA, counter: 1),
            hlc: HybridTimestamp(physicalMilliseconds: 1_700_000_000_000, logical: 0),
            wallMilliseconds: 1_700_000_000_000
        )
        var preference = WireMessage.delta(Delta(preferences: [write], coverage: coverage)).encoded()
        // Layout: type, replicas, devices, no streams, tables or columns, no entries, count,
        // key (1 + 16), flags.
        let preferenceFlagsAt = 1 + 17 + 17 + 1 + 1 + 1 + 1 + 1 + 17
        #expect(preference[preferenceFlagsAt] == 1)
        preference[preferenceFlagsAt] |= 2
        Self.refused(preference, saying: "preference flags")
    }

    /// Row changes: kinds, key counts and value tags outside their ranges are malformed, and so
    /// is a change whose life does not match its kind (caught by the delta's check).
    @Test func rowChangesOutsideTheirRangesAreRefused() throws {
        let change = RowChange(
            key: RowKey(table: "t", primaryKey: [.integer(1)]),
            kind: .update,
            causalLength: 1,
            hlc: HybridTimestamp(physicalMilliseconds: 1_700_000_000_000, logical: 0),
            dot: Dot(replica: Self.replicaA, counter: 1),
            values: [.init(column: "c", value: .null)]
        )
        let coverage = [Delta.Coverage(replica: Self.replicaA, from: 0, through: 1)]
        let delta = Delta(rows: [change], coverage: coverage)
        let bytes = WireMessage.delta(delta).encoded()
        // Layout: type, replicas (17), no devices, no streams, tables (1 + 1 + 1), columns (1 + 1 + 1),
        // no entries, no preferences, coverage (1 + 3), row count, table index, then the kind.
        let kindAt = 1 + 17 + 1 + 1 + 3 + 3 + 1 + 1 + 4 + 1 + 1
        #expect(bytes[kindAt] == 2)
        for (kind, reason) in [(UInt8(0), "row change kind"), (5, "row change kind")] {
            var bad = bytes
            bad[kindAt] = kind
            Self.refused(bad, saying: reason)
        }
        // Causal length (1), replica index, counter, HLC (zigzag, several bytes), then the key count.
        var zeroLife = bytes
        zeroLife[kindAt + 1] = 0
        Self.refused(zeroLife, saying: "causal length")
        // From the end: totals count, the value (NULL tag), its column index, the values count, the
        // key value (tag 1, zigzag 2), then the key count; before all that, the signed section.
        let keyCountAt = bytes.indices.last! - 6 - delta.signedSectionBytes
        #expect(bytes[keyCountAt] == 1)
        for count: UInt8 in [0, 33] {
            var bad = bytes
            bad[keyCountAt] = count
            Self.refused(bad, saying: "a key has")
        }
        var badTag = bytes
        badTag[keyCountAt + 1] = 9
        Self.refused(badTag, saying: "value tag")
        // A delete that sets columns decodes but is refused by the delta's check.
        let delete = RowChange(
            key: change.key,
            kind: .delete,
            causalLength: 2,
            hlc: change.hlc,
            dot: change.dot,
            values: change.values
        )
        #expect(Delta(rows: [delete], coverage: coverage).problem()?.contains("even life") == true)
    }

    /// A push's counter step wraps modulo 2^64, and the counter it lands on must be 1…2^40 − 1.
    @Test func pushCountersOutsideTheRangeAreMalformed() throws {
        var encoder = EntryPushEncoder()
        let pushed = encoder.push(Self.entry(counter: 5), signature: testSignature, digestImplied: false)
        let first = try #require(pushed)
        var decoder = EntryPushDecoder()
        #expect(try decoder.entry(from: first).dot.counter == 5)
        var wrapped = first
        wrapped.replicaDefinition = nil
        wrapped.streamDefinition = nil
        wrapped.counterStep = -5  // back to 0
        #expect(throws: WireError.self) { try decoder.entry(from: wrapped) }
        var beyond = wrapped
        beyond.counterStep = Int64(Dot.maxCounter)  // 5 + 2^40 − 1
        #expect(throws: WireError.self) { try decoder.entry(from: beyond) }
        var backwards = wrapped
        backwards.counterStep = -6  // wraps to 2^64 − 1
        #expect(throws: WireError.self) { try decoder.entry(from: backwards) }
    }

    /// The responder's "no version in common" reply is told apart from a Hello by its zero version.
    @Test func versionRefusalRoundTripsAndIsNotAHello() throws {
        let refusal = VersionRefusal(versions: 1...1)
        #expect(try VersionRefusal.decode(refusal.encoded()) == refusal)
        let hello = Hello(
            version: 1,
            device: Self.device,
            name: "home",
            replica: Self.replicaA,
            hlc: .zero,
            wallMilliseconds: 0
        )
        #expect(try VersionRefusal.decode(hello.encoded()) == nil)
        #expect(throws: WireError.self) { try VersionRefusal.decode([0, 0, 0, 3, 0, 1]) }
    }
}
