package import LANSyncCore

/// LANSync's wire protocol, version 5: the messages two members exchange after their Noise
/// handshake. `docs/protocol.md` is the full specification; this file is its executable form.
package enum WireProtocol {
    /// Protocol versions this build speaks.
    /// Version 2 added app-table rows to deltas (and to the digest), version 3 the row push
    /// (message type 8). Version 4 signs changes (docs/signed-changes.md): every delta's range
    /// and every push carries its writer's signature, and a receiver checks them before merging.
    /// Earlier versions are refused: a group that still took unsigned changes from some peers
    /// would let any member suppress another's changes by claiming their coverage without rows.
    /// Version 5 lets a delete end an appended row (a parent's `ON DELETE CASCADE`): a version-4
    /// peer would keep such a row for good, and the group would never converge.
    package static let versions: ClosedRange<UInt16> = 5...5
    /// The Noise prologue: bound into the handshake hash, so a peer of another protocol fails.
    package static let prologue = Array("LANSync wire protocol".utf8)
    /// The most a reassembled message may hold.
    package static let maxMessageBytes = 4 * 1024 * 1024
    /// The most rows a delta message may carry.
    package static let maxRowsPerDelta = 20_000
    /// Replicas, devices and streams a delta may name; replicas a version vector may name.
    package static let maxTableEntries = 4_096
    /// The longest `Hello.name` and goodbye reason, in UTF-8 bytes.
    package static let maxNameBytes = 256
}

/// What each side says about itself inside the handshake (messages 2 and 3, encrypted).
package struct Hello: Equatable, Sendable {
    package var version: UInt16
    package var device: DeviceID
    package var name: String
    package var replica: ReplicaID
    /// The sender's HLC reading and wall clock when it wrote this: the receiver's skew check.
    package var hlc: HybridTimestamp
    package var wallMilliseconds: UInt64
    /// The device's Ed25519 signing key (version 3 and later): the handshake authenticates the
    /// Hello with the static key, which binds the two (protocol §11).
    package var signingKey: [UInt8]?

    package init(
        version: UInt16,
        device: DeviceID,
        name: String,
        replica: ReplicaID,
        hlc: HybridTimestamp,
        wallMilliseconds: UInt64,
        signingKey: [UInt8]? = nil
    ) {
        self.version = version
        self.device = device
        self.name = name
        self.replica = replica
        self.hlc = hlc
        self.wallMilliseconds = wallMilliseconds
        // Version 3 always carries 32 bytes (zeros when the sender has none to give).
        self.signingKey = version >= Self.signingKeyVersion ? signingKey ?? [UInt8](repeating: 0, count: 32) : nil
    }

    /// Version 3 added the signing key to the Hello.
    static let signingKeyVersion: UInt16 = 3

    package func encoded() -> [UInt8] {
        var writer = ByteWriter()
        writer.fixed16(version)
        writer.raw(device.bytes)
        writer.string(name)
        writer.raw(replica.bytes)
        writer.fixed64(hlc.rawValue)
        writer.fixed64(wallMilliseconds)
        if version >= Self.signingKeyVersion, let signingKey { writer.raw(signingKey) }
        return writer.bytes
    }

    package static func decode(_ bytes: [UInt8]) throws(WireError) -> Hello {
        var reader = ByteReader(bytes)
        let version = try reader.fixed16()
        guard version != 0 else { throw WireError("hello's version is 0") }
        guard let device = DeviceID(bytes: try reader.raw(16)) else { throw WireError("bad device ID") }
        let name = try reader.string(atMost: WireProtocol.maxNameBytes, "device name")
        guard !name.isEmpty, !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw WireError("device name is empty or has control characters")
        }
        guard let replica = ReplicaID(bytes: try reader.raw(16)) else { throw WireError("bad replica ID") }
        let hlc = HybridTimestamp(rawValue: try reader.fixed64())
        let wall = try reader.fixed64()
        guard wall <= HybridTimestamp.maxPhysicalMilliseconds else {
            throw WireError("hello's wall clock \(wall) ms is beyond \(HybridTimestamp.maxPhysicalMilliseconds)")
        }
        let signingKey = version >= signingKeyVersion ? try reader.raw(32) : nil
        try reader.expectEnd("hello")
        return Hello(
            version: version,
            device: device,
            name: name,
            replica: replica,
            hlc: hlc,
            wallMilliseconds: wall,
            signingKey: signingKey
        )
    }
}

/// The responder's message 2 payload when it shares no protocol version with the initiator:
/// `0 (u16) · its lowest version (u16) · its highest version (u16)`. A `Hello`'s version is
/// never 0, so the initiator tells the two apart by their first two bytes, and can say "no
/// version in common" rather than fail as if the group secret were wrong.
package struct VersionRefusal: Equatable, Sendable {
    package var versions: ClosedRange<UInt16>

    package init(versions: ClosedRange<UInt16> = WireProtocol.versions) { self.versions = versions }

    package func encoded() -> [UInt8] {
        var writer = ByteWriter()
        writer.fixed16(0)
        writer.fixed16(versions.lowerBound)
        writer.fixed16(versions.upperBound)
        return writer.bytes
    }

    /// The refusal, if `bytes` is one (starts with a zero version); nil for anything else.
    package static func decode(_ bytes: [UInt8]) throws(WireError) -> VersionRefusal? {
        guard bytes.count >= 2, bytes[0] == 0, bytes[1] == 0 else { return nil }
        var reader = ByteReader(bytes)
        _ = try reader.fixed16()
        let low = try reader.fixed16()
        let high = try reader.fixed16()
        guard low <= high else { throw WireError("empty version range \(low)...\(high)") }
        try reader.expectEnd("version refusal")
        return VersionRefusal(versions: low...high)
    }
}

/// The first handshake message's payload: which protocol versions the initiator speaks.
package struct VersionOffer: Equatable, Sendable {
    package var versions: ClosedRange<UInt16>

    package init(versions: ClosedRange<UInt16> = WireProtocol.versions) { self.versions = versions }

    package func encoded() -> [UInt8] {
        var writer = ByteWriter()
        writer.raw(Array("LSYN".utf8))
        writer.fixed16(versions.lowerBound)
        writer.fixed16(versions.upperBound)
        return writer.bytes
    }

    package static func decode(_ bytes: [UInt8]) throws(WireError) -> VersionOffer {
        var reader = ByteReader(bytes)
        guard try reader.raw(4) == Array("LSYN".utf8) else { throw WireError("not a LANSync version offer") }
        let low = try reader.fixed16()
        let high = try reader.fixed16()
        guard low <= high else { throw WireError("empty version range \(low)...\(high)") }
        try reader.expectEnd("version offer")
        return VersionOffer(versions: low...high)
    }

    /// The highest version both speak, or nil.
    package func agreed(with ours: ClosedRange<UInt16> = WireProtocol.versions) -> UInt16? {
        let low = max(versions.lowerBound, ours.lowerBound)
        let high = min(versions.upperBound, ours.upperBound)
        return low <= high ? high : nil
    }
}

/// A message after the handshake.
package enum WireMessage: Equatable, Sendable {
    /// "This is what I hold": the sender's version vector, digest and clock. Sent on connect and
    /// after the sender's state changes; the receiver answers with the deltas the sender lacks.
    case state(PeerState)
    /// Rows the receiver lacks, with the coverage they complete.
    case delta(Delta)
    /// Keepalive, answered by `pong` with the same value.
    case ping(UInt64)
    case pong(UInt64)
    /// The sender is closing the connection, and why (shown in `lansync peers`).
    case goodbye(code: GoodbyeCode, reason: String)
    /// One new entry, compactly (see `EntryPush`).
    case push(EntryPush)
    /// One new app-table row change, compactly (see `RowPush`; protocol version 3 and later).
    case rowPush(RowPush)
    /// "Send me this replica's changes after this counter again" (version 4): the receiver did
    /// not take a range the sender sent (it could not verify it yet, or a change it calls
    /// superseded still wins here), and its version vector did not move.
    case resend(ReplicaID, after: UInt64)
    /// The group's records (writes under `lansync/`), handed to a member that was away during a
    /// removal so that it can open the new epoch's secret (§11); merged without coverage, and
    /// followed by `goodbye(not a member)`.
    case records([PreferenceWrite])

    enum Kind: UInt8 {
        case state = 1, delta = 2, ping = 3, pong = 4, goodbye = 5
        /// Another message, compressed: varint length · one Zstandard frame. Never nested.
        case compressed = 6
        case push = 7
        case rowPush = 8
        case resend = 9
        case records = 10
    }

    /// Messages at least this long are sent compressed when that makes them smaller.
    package static let compressionThreshold = 2_048

    /// The message's bytes on the wire: compressed when it is large and compression pays.
    package func wireBytes() -> [UInt8] {
        let plain = encoded()
        guard plain.count >= Self.compressionThreshold, let packed = Zstd.compress(plain) else { return plain }
        var writer = ByteWriter(capacity: packed.count + 8)
        writer.byte(Kind.compressed.rawValue)
        writer.varint(plain.count)
        writer.raw(packed)
        return writer.bytes.count < plain.count ? writer.bytes : plain
    }

    package func encoded() -> [UInt8] {
        var writer = ByteWriter()
        switch self {
        case .state(let state):
            writer.byte(Kind.state.rawValue)
            state.encode(into: &writer)
        case .delta(let delta):
            writer.byte(Kind.delta.rawValue)
            DeltaCoding.encode(delta, into: &writer, signed: true)
        case .ping(let value):
            writer.byte(Kind.ping.rawValue)
            writer.fixed64(value)
        case .pong(let value):
            writer.byte(Kind.pong.rawValue)
            writer.fixed64(value)
        case .goodbye(let code, let reason):
            writer.byte(Kind.goodbye.rawValue)
            writer.byte(code.rawValue)
            writer.string(String(reason.utf8.prefix(WireProtocol.maxNameBytes)) ?? "")
        case .push(let push):
            writer.byte(Kind.push.rawValue)
            push.encode(into: &writer)
        case .rowPush(let push):
            writer.byte(Kind.rowPush.rawValue)
            push.encode(into: &writer)
        case .resend(let replica, let counter):
            writer.byte(Kind.resend.rawValue)
            writer.raw(replica.bytes)
            writer.varint(counter)
        case .records(let records):
            writer.byte(Kind.records.rawValue)
            writer.raw(WelcomeRecords.encode(records, within: WireProtocol.maxMessageBytes - 1).bytes)
        }
        return writer.bytes
    }

    package static func decode(_ bytes: [UInt8]) throws(WireError) -> WireMessage {
        guard bytes.first == Kind.compressed.rawValue else { return try decodePlain(bytes) }
        var reader = ByteReader(bytes)
        _ = try reader.byte()
        let length = try reader.count(atMost: WireProtocol.maxMessageBytes, "uncompressed length")
        let plain = try Zstd.decompress(try reader.raw(reader.remaining), expectedLength: length)
        guard plain.first != Kind.compressed.rawValue else { throw WireError("nested compression") }
        return try decodePlain(plain)
    }

    static func decodePlain(_ bytes: [UInt8]) throws(WireError) -> WireMessage {
        guard bytes.count <= WireProtocol.maxMessageBytes else { throw WireError("message too large") }
        var reader = ByteReader(bytes)
        let kind = try reader.byte()
        let message: WireMessage
        switch Kind(rawValue: kind) {
        case .state: message = .state(try PeerState.decode(from: &reader))
        case .delta: message = .delta(try DeltaCoding.decode(from: &reader, signed: true))
        case .ping: message = .ping(try reader.fixed64())
        case .pong: message = .pong(try reader.fixed64())
        case .goodbye:
            let code = GoodbyeCode(rawValue: try reader.byte()) ?? .other
            message = .goodbye(code: code, reason: try reader.string(atMost: WireProtocol.maxNameBytes, "reason"))
        case .push: message = .push(try EntryPush.decode(from: &reader))
        case .rowPush: message = .rowPush(try RowPush.decode(from: &reader))
        case .resend:
            let replica = ReplicaID(bytes: try reader.raw(16))!
            message = .resend(replica, after: try reader.counter(atLeast: 0, "resend counter"))
        case .records:
            let records = try WelcomeRecords.decode(try reader.raw(reader.remaining))
            guard !records.isEmpty else { throw WireError("a records message holds no record") }
            message = .records(records)
        case .compressed: throw WireError("nested compression")
        case nil: throw WireError("unknown message type \(kind)")
        }
        try reader.expectEnd("message")
        return message
    }
}

package enum GoodbyeCode: UInt8, Sendable {
    case shuttingDown = 1, clockSkew = 2, malformed = 3, duplicateConnection = 4, versionMismatch = 5
    /// The group's member records do not let the receiver in (version 3): removed, or a new key
    /// no member vouched for; or, after a hand-over of a new epoch, "reconnect with its key".
    case notAMember = 6
    case other = 255
}

/// A replica's summary, as peers see it.
package struct PeerState: Equatable, Sendable {
    package var versionVector: VersionVector
    package var digest: StateDigest
    package var hlc: HybridTimestamp

    package init(versionVector: VersionVector, digest: StateDigest, hlc: HybridTimestamp) {
        self.versionVector = versionVector
        self.digest = digest
        self.hlc = hlc
    }

    func encode(into writer: inout ByteWriter) {
        let counters = versionVector.counters.sorted { $0.key < $1.key }
        writer.varint(counters.count)
        for (replica, counter) in counters {
            writer.raw(replica.bytes)
            writer.varint(counter)
        }
        writer.raw(digest.bytes)
        writer.fixed64(hlc.rawValue)
    }

    static func decode(from reader: inout ByteReader) throws(WireError) -> PeerState {
        let count = try reader.count(atMost: WireProtocol.maxTableEntries, "version vector size")
        var vector = VersionVector()
        for _ in 0..<count {
            let replica = ReplicaID(bytes: try reader.raw(16))!
            guard vector[replica] == 0 else { throw WireError("version vector names replica \(replica) twice") }
            vector[replica] = try reader.counter(atLeast: 1, "version vector counter")
        }
        let digest = StateDigest(bytes: try reader.raw(32))!
        return PeerState(versionVector: vector, digest: digest, hlc: HybridTimestamp(rawValue: try reader.fixed64()))
    }
}
