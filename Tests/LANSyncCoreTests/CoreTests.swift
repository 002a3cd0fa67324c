import LANSyncCore
import LANSyncCrypto
import Testing

@Suite struct DeviceIDTests {
    let id = DeviceID(bytes: Array(0..<16))!

    @Test func printsFourGroupsOfSevenAndParsesBack() throws {
        let text = id.description
        #expect(text.split(separator: "-").map(\.count) == [7, 7, 7, 7])
        #expect(DeviceID(text) == id)
        #expect(DeviceID(text.lowercased()) == id)
        #expect(DeviceID(text.replacingOccurrences(of: "-", with: "")) == id)
    }

    @Test func checkCharactersCatchATypo() {
        var chars = Array(id.description)
        let index = chars.firstIndex(where: { $0 != "-" })!
        chars[index] = chars[index] == "A" ? "B" : "A"
        #expect(DeviceID(String(chars)) == nil)
        #expect(DeviceID("not-a-device-id") == nil)
        #expect(DeviceID(bytes: [1, 2, 3]) == nil)
    }
}

extension DeviceIDTests {
    /// The example in docs/protocol.md §9, computed outside LANSync from the document's steps
    /// (Python's base64.b32encode and the Luhn rule as written): 16 bytes of 0x5A are
    /// `LJNFUWS2LJNFUWS2LJNFUWS2LI` in base32; the halves' check characters are 4 and R.
    @Test func theProtocolDocumentsExampleHolds() {
        let id = DeviceID(bytes: [UInt8](repeating: 0x5A, count: 16))!
        #expect(id.description == "LJNFUWS-2LJNFU4-WS2LJNF-UWS2LIR")
        #expect(DeviceID("ljnfuws2ljnfu4ws2ljnfuws2lir") == id)
    }
}

@Suite struct HybridLogicalClockTests {
    @Test func ticksStrictlyIncreaseEvenWhenTheClockGoesBack() {
        var clock = HybridLogicalClock()
        var last = HybridTimestamp.zero
        for now in [1_000, 1_000, 999, 500, 1_001, 1_001, 2_000] as [UInt64] {
            let reading = clock.tick(now: now)
            #expect(reading > last)
            last = reading
        }
        #expect(last.physicalMilliseconds == 2_000)
    }

    @Test func observedReadingsOrderLaterTicks() throws {
        var clock = HybridLogicalClock()
        let remote = HybridTimestamp(physicalMilliseconds: 5_000, logical: 3)
        try clock.observe(remote, now: 4_990, maxSkew: 60_000)
        #expect(clock.tick(now: 4_990) > remote)
    }

    @Test func readingsTooFarAheadAreRefused() {
        var clock = HybridLogicalClock()
        let future = HybridTimestamp(physicalMilliseconds: 1_000 + 600_000, logical: 0)
        #expect(throws: ClockSkewError.self) { try clock.observe(future, now: 1_000, maxSkew: 60_000) }
        #expect(clock.last == .zero)
    }

    @Test func logicalOverflowBorrowsTheNextMillisecond() {
        var clock = HybridLogicalClock(last: HybridTimestamp(physicalMilliseconds: 10, logical: .max))
        let next = clock.tick(now: 10)
        #expect(next == HybridTimestamp(physicalMilliseconds: 11, logical: 0))
    }
}

@Suite struct StateDigestTests {
    @Test func removingUndoesInsertingInAnyOrder() {
        let hashes = (0..<20).map { SHA256.hash([UInt8($0)]) }
        var a = StateDigest()
        for hash in hashes { a.insert(hash: hash) }
        var b = StateDigest()
        for hash in hashes.reversed() { b.insert(hash: hash) }
        #expect(a == b)
        for hash in hashes { a.remove(hash: hash) }
        #expect(a == StateDigest())
        #expect(StateDigest(bytes: b.bytes) == b)
    }

    /// A digest of part of the elements added to one of the rest is the digest of them all,
    /// carries between limbs included (hashes of all ones carry through every limb).
    @Test func addingDigestsOfTwoPartsGivesTheWhole() {
        let hashes =
            (0..<40).map { SHA256.hash([UInt8($0)]) } + Array(repeating: [UInt8](repeating: 0xFF, count: 32), count: 3)
        for cut in [0, 1, 20, hashes.count] {
            var whole = StateDigest()
            var (first, second) = (StateDigest(), StateDigest())
            for (index, hash) in hashes.enumerated() {
                whole.insert(hash: hash)
                if index < cut { first.insert(hash: hash) } else { second.insert(hash: hash) }
            }
            first.add(second)
            #expect(first == whole)
        }
    }

    @Test func differentSetsHaveDifferentDigests() {
        var a = StateDigest()
        a.insert(hash: SHA256.hash([1]))
        var b = StateDigest()
        b.insert(hash: SHA256.hash([2]))
        #expect(a != b)
    }
}

/// The canonical bytes are what every replica hashes into its digest: they must never change
/// between versions, or replicas holding the same rows would disagree. Pinned here byte for byte.
@Suite struct CanonicalBytesTests {
    static let entry = Entry(
        id: "0190a1b2-c3d4-7e5f-8a6b-7c8d9e0f1a2b",
        stream: "symbol_taps",
        originDevice: DeviceID(bytes: Array(0x10...0x1F))!,
        dot: Dot(replica: ReplicaID(high: 0x0102_0304_0506_0708, low: 0x090A_0B0C_0D0E_0F10), counter: 0x1234),
        hlc: HybridTimestamp(rawValue: 0x0190_A1B2_C3D4_0007),
        wallMilliseconds: 1_718_000_000_123,
        payload: "{\"symbol_id\":1042}"
    )

    @Test func entryBytesArePinned() {
        let hex = Self.entry.canonicalBytes.map { String($0, radix: 16).leftPadded }.joined()
        // "E", then id and stream (4-byte big-endian length + UTF-8), device, replica, counter,
        // HLC, wall time (8 bytes big-endian each), payload (length + UTF-8).
        #expect(
            hex
                == "450000002430313930613162322d633364342d376535662d386136622d3763386439653066316132620000000b73796d626f6c5f74617073101112131415161718191a"
                + "1b1c1d1e1f0102030405060708090a0b0c0d0e0f1000000000000012340190a1b2c3d400070000019000c79c7b000000127b2273796d626f6c5f6964223a313034327d"
        )
    }

    @Test func appendingToABufferGivesTheSameBytes() {
        var buffer: [UInt8] = [0xAA]
        Self.entry.appendCanonicalBytes(to: &buffer)
        #expect(buffer == [0xAA] + Self.entry.canonicalBytes)
    }
}

extension String {
    fileprivate var leftPadded: String { count == 1 ? "0" + self : self }
}

@Suite struct DeltaValidationTests {
    let replica = ReplicaID(high: 1, low: 2)
    let device = DeviceID(bytes: [UInt8](repeating: 7, count: 16))!

    func entry(counter: UInt64, stream: String = "taps") -> Entry {
        Entry(
            id: "e\(counter)",
            stream: stream,
            originDevice: device,
            dot: Dot(replica: replica, counter: counter),
            hlc: HybridTimestamp(physicalMilliseconds: 1, logical: 0),
            wallMilliseconds: 1,
            payload: "{}"
        )
    }

    @Test func wellFormedDeltaPasses() {
        let delta = Delta(entries: [entry(counter: 1)], coverage: [.init(replica: replica, from: 0, through: 1)])
        #expect(delta.problem() == nil)
    }

    @Test(arguments: [
        Delta(entries: [], coverage: [.init(replica: ReplicaID(high: 1, low: 2), from: 3, through: 3)])
    ])
    func emptyRangeIsRejected(delta: Delta) {
        #expect(delta.problem() != nil)
    }

    @Test func rowsOutsideTheCoverageOrWithBadNamesAreRejected() {
        let outside = Delta(entries: [entry(counter: 5)], coverage: [.init(replica: replica, from: 0, through: 1)])
        #expect(outside.problem()?.contains("outside") == true)
        let uncovered = Delta(entries: [entry(counter: 1)])
        #expect(uncovered.problem() != nil)
        let badName = Delta(
            entries: [entry(counter: 1, stream: "Bad Name")],
            coverage: [.init(replica: replica, from: 0, through: 1)]
        )
        #expect(badName.problem() != nil)
        let twice = Delta(coverage: [
            .init(replica: replica, from: 0, through: 1), .init(replica: replica, from: 1, through: 2),
        ])
        #expect(twice.problem()?.contains("two coverage") == true)
    }

    @Test func coverageWithAGapDoesNotAdvanceTheVector() {
        var vector = VersionVector([replica: 2])
        vector.advance(by: [.init(replica: replica, from: 5, through: 9)])
        #expect(vector[replica] == 2)
        vector.advance(by: [.init(replica: replica, from: 2, through: 9)])
        #expect(vector[replica] == 9)
    }
}

@Suite struct NameTests {
    @Test(arguments: ["symbol_taps", "phrases", "a", "sessions.v2", "x-1"])
    func goodStreamNames(name: String) { #expect(Names.streamProblem(name) == nil) }

    @Test(arguments: ["", "Symbol", "has space", "_lead", "tab\t", String(repeating: "a", count: 65), "ünïcode"])
    func badStreamNames(name: String) { #expect(Names.streamProblem(name) != nil) }

    @Test(arguments: ["device/name", "caregiver/active", "controls/slider/sensitivity"])
    func goodKeys(key: String) { #expect(Names.keyProblem(key) == nil) }

    @Test(arguments: ["", "/lead", "trail/", "a//b", "Upper/case", "sp ace"])
    func badKeys(key: String) { #expect(Names.keyProblem(key) != nil) }

    @Test func generatedIDsAreTimeOrderedUUIDv7() {
        let early = EntryIDs.make(hlc: HybridTimestamp(physicalMilliseconds: 1_700_000_000_000, logical: 0))
        let later = EntryIDs.make(hlc: HybridTimestamp(physicalMilliseconds: 1_700_000_000_000, logical: 1))
        let latest = EntryIDs.make(hlc: HybridTimestamp(physicalMilliseconds: 1_700_000_000_001, logical: 0))
        #expect(early < later && later < latest)
        #expect(early.count == 36 && Array(early)[14] == "7")
        #expect(Names.entryIDProblem(early) == nil)
    }
}
