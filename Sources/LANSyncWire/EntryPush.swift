package import LANSyncCore

/// One new entry pushed live, in few bytes: a tap logged on one device reaches a connected peer
/// as about 30 bytes plus its payload (protocol §5.1).
///
/// Replica and stream IDs are interned per connection and direction: the first push that uses one
/// defines it (its full bytes) and takes the next slot; later pushes name the slot. Counters and
/// clock readings travel as steps from the previous push. When `digestImplied` is set, the
/// sender's state digest is exactly its last announced one plus this entry, so no state message
/// follows: the receiver updates the sender's digest itself.
package struct EntryPush: Equatable, Sendable {
    package struct ReplicaDefinition: Equatable, Sendable {
        package let replica: ReplicaID
        package let device: DeviceID
    }

    package var replicaDefinition: ReplicaDefinition?
    package var streamDefinition: String?
    package var replicaSlot: Int
    package var streamSlot: Int
    /// The entry's counter minus the previous push's counter for the same replica (or the counter).
    package var counterStep: Int64
    package var id: String
    /// The entry's raw HLC reading minus the previous push's in this direction (or minus 0).
    package var hlcStep: Int64
    /// Wall-clock milliseconds minus the HLC's milliseconds.
    package var wallOffset: Int64
    package var payload: String
    package var digestImplied: Bool
    /// The writer's signature of its chain's head at this entry's counter (version 4, 64 bytes):
    /// the push completes the entry's replica by one counter, a range like any delta's.
    package var signature: [UInt8]

    enum Flag {
        static let replicaDefinition: UInt8 = 1
        static let streamDefinition: UInt8 = 2
        static let uuidID: UInt8 = 4
        static let digestImplied: UInt8 = 8
    }

    func encode(into writer: inout ByteWriter) {
        let uuid = UUIDText.halves(id)
        var flags: UInt8 = 0
        if replicaDefinition != nil { flags |= Flag.replicaDefinition }
        if streamDefinition != nil { flags |= Flag.streamDefinition }
        if uuid != nil { flags |= Flag.uuidID }
        if digestImplied { flags |= Flag.digestImplied }
        writer.byte(flags)
        if let replicaDefinition {
            writer.raw(replicaDefinition.replica.bytes)
            writer.raw(replicaDefinition.device.bytes)
        }
        if let streamDefinition { writer.string(streamDefinition) }
        writer.varint(replicaSlot)
        writer.varint(streamSlot)
        writer.signed(counterStep)
        if let uuid { UUIDText.write(uuid, into: &writer) } else { writer.string(id) }
        writer.signed(hlcStep)
        writer.signed(wallOffset)
        writer.string(payload)
        writer.raw(signature)
    }

    static func decode(from reader: inout ByteReader) throws(WireError) -> EntryPush {
        let flags = try reader.flags(known: 15, "push flags")
        var definition: ReplicaDefinition?
        if flags & Flag.replicaDefinition != 0 {
            let replica = ReplicaID(bytes: try reader.raw(16))!
            let device = DeviceID(bytes: try reader.raw(16))!
            definition = ReplicaDefinition(replica: replica, device: device)
        }
        let stream =
            flags & Flag.streamDefinition != 0 ? try reader.string(atMost: Names.maxStreamLength, "stream") : nil
        let replicaSlot = try reader.count(atMost: WireProtocol.maxTableEntries - 1, "replica slot")
        let streamSlot = try reader.count(atMost: WireProtocol.maxTableEntries - 1, "stream slot")
        let counterStep = try reader.signed()
        let id =
            flags & Flag.uuidID != 0
            ? try UUIDText.text(from: &reader) : try reader.string(atMost: Names.maxEntryIDLength, "entry id")
        let hlcStep = try reader.signed()
        let wallOffset = try reader.signed()
        let payload = try reader.string(atMost: Delta.maxValueBytes, "payload")
        let signature = try reader.raw(64)
        return EntryPush(
            replicaDefinition: definition,
            streamDefinition: stream,
            replicaSlot: replicaSlot,
            streamSlot: streamSlot,
            counterStep: counterStep,
            id: id,
            hlcStep: hlcStep,
            wallOffset: wallOffset,
            payload: payload,
            digestImplied: flags & Flag.digestImplied != 0,
            signature: signature
        )
    }
}

/// The sending side's tables for one connection: builds pushes, remembering what it defined.
package struct EntryPushEncoder: Sendable {
    private var replicas: [ReplicaID: Int] = [:]
    private var streams: [String: Int] = [:]
    private var lastCounter: [Int: UInt64] = [:]
    private var lastHLC: UInt64 = 0

    package init() {}

    /// The push for `entry` with the writer's `signature` of its head there, updating the tables;
    /// nil when a table is full (send a delta instead).
    package mutating func push(_ entry: Entry, signature: [UInt8], digestImplied: Bool) -> EntryPush? {
        precondition(signature.count == 64, "an Ed25519 signature is 64 bytes")
        let newReplica = replicas[entry.dot.replica] == nil
        let newStream = streams[entry.stream] == nil
        if newReplica && replicas.count >= WireProtocol.maxTableEntries { return nil }
        if newStream && streams.count >= WireProtocol.maxTableEntries { return nil }
        let replicaSlot = replicas[entry.dot.replica] ?? replicas.count
        let streamSlot = streams[entry.stream] ?? streams.count
        replicas[entry.dot.replica] = replicaSlot
        streams[entry.stream] = streamSlot
        let counterStep = Int64(bitPattern: entry.dot.counter &- (lastCounter[replicaSlot] ?? 0))
        lastCounter[replicaSlot] = entry.dot.counter
        let hlcStep = Int64(bitPattern: entry.hlc.rawValue &- lastHLC)
        lastHLC = entry.hlc.rawValue
        return EntryPush(
            replicaDefinition: newReplica ? .init(replica: entry.dot.replica, device: entry.originDevice) : nil,
            streamDefinition: newStream ? entry.stream : nil,
            replicaSlot: replicaSlot,
            streamSlot: streamSlot,
            counterStep: counterStep,
            id: entry.id,
            hlcStep: hlcStep,
            wallOffset: entry.wallMilliseconds &- Int64(bitPattern: entry.hlc.physicalMilliseconds),
            payload: entry.payload,
            digestImplied: digestImplied,
            signature: signature
        )
    }
}

/// The receiving side's tables for one connection: turns pushes back into entries. A definition
/// must take exactly the next slot, and a slot must be defined before use.
package struct EntryPushDecoder: Sendable {
    private var replicas: [EntryPush.ReplicaDefinition] = []
    private var streams: [String] = []
    private var lastCounter: [Int: UInt64] = [:]
    private var lastHLC: UInt64 = 0

    package init() {}

    package mutating func entry(from push: EntryPush) throws(WireError) -> Entry {
        if let definition = push.replicaDefinition {
            guard push.replicaSlot == replicas.count else { throw WireError("push defines replica slot out of order") }
            replicas.append(definition)
        }
        if let stream = push.streamDefinition {
            guard push.streamSlot == streams.count else { throw WireError("push defines stream slot out of order") }
            streams.append(stream)
        }
        guard push.replicaSlot < replicas.count else { throw WireError("push names an undefined replica slot") }
        guard push.streamSlot < streams.count else { throw WireError("push names an undefined stream slot") }
        let replica = replicas[push.replicaSlot]
        // Steps wrap modulo 2^64; the counter they land on must be a valid one.
        let counter = (lastCounter[push.replicaSlot] ?? 0) &+ UInt64(bitPattern: push.counterStep)
        guard counter > 0, counter <= Dot.maxCounter else {
            throw WireError("push counter \(counter) is outside 1...\(Dot.maxCounter)")
        }
        let hlc = HybridTimestamp(rawValue: lastHLC &+ UInt64(bitPattern: push.hlcStep))
        let wall = try DeltaCoding.wallClock(hlc, offset: push.wallOffset)
        lastCounter[push.replicaSlot] = counter
        lastHLC = hlc.rawValue
        return Entry(
            id: push.id,
            stream: streams[push.streamSlot],
            originDevice: replica.device,
            dot: Dot(replica: replica.replica, counter: counter),
            hlc: hlc,
            wallMilliseconds: wall,
            payload: push.payload
        )
    }
}

extension EntryPush {
    /// The delta a push stands for: its one entry, completing the entry's replica by one counter,
    /// with the writer's signature of its head there. Only a delta of exactly this shape may be
    /// sent as a push (so none whose range needs a genesis, or carries a stub).
    package static func delta(carrying entry: Entry, signature: [UInt8]) -> Delta {
        Delta(
            entries: [entry],
            coverage: [
                .init(
                    replica: entry.dot.replica,
                    from: entry.dot.counter - 1,
                    through: entry.dot.counter,
                    signature: signature
                )
            ]
        )
    }

    /// The sender's digest after a digest-implied push: the one it last announced (or implied)
    /// plus the entry's element hash. Both sides compute it; the sender sets the flag only when
    /// its real digest is this.
    package static func impliedDigest(
        after told: StateDigest,
        adding entry: Entry,
        hasher: ElementHasher
    ) -> StateDigest {
        var digest = told
        digest.insert(hash: hasher.hash(entry))
        return digest
    }
}
