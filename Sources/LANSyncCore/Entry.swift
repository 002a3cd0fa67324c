/// An immutable log record, one element of a stream's grow-only set.
///
/// Identified by `id`: a second append with the same id is the same entry. Should two different
/// versions ever share an id (a bug, or two reinstalls of one device replaying ids), every replica
/// keeps the same one — the least under `Entry.precedes` — so replicas never diverge.
public struct Entry: Hashable, Sendable {
    /// The id: a UUIDv7 unless the writer gave one; an entry is identified by it alone.
    public let id: String
    /// The stream it belongs to (`symbol_taps`, `sessions`, ...).
    public let stream: String
    /// The device that wrote it.
    public let originDevice: DeviceID
    /// The operation that wrote it: the writing replica and its counter.
    public let dot: Dot
    /// The hybrid logical clock reading of the write.
    public let hlc: HybridTimestamp
    /// Wall-clock time of the write at its origin, milliseconds since the Unix epoch (UTC).
    public let wallMilliseconds: Int64
    /// The payload as compact JSON text, byte for byte as written at its origin.
    public let payload: String

    package init(
        id: String,
        stream: String,
        originDevice: DeviceID,
        dot: Dot,
        hlc: HybridTimestamp,
        wallMilliseconds: Int64,
        payload: String
    ) {
        self.id = id
        self.stream = stream
        self.originDevice = originDevice
        self.dot = dot
        self.hlc = hlc
        self.wallMilliseconds = wallMilliseconds
        self.payload = payload
    }

    /// The total order that picks one version among several sharing an id: the earliest write
    /// (HLC, then replica ID, then counter) wins, and the encoded bytes break any remaining tie.
    /// Keeping the least element is a join (commutative, associative, idempotent).
    package static func precedes(_ a: Entry, _ b: Entry) -> Bool {
        if a.hlc != b.hlc { return a.hlc < b.hlc }
        if a.dot != b.dot { return a.dot < b.dot }
        return a.canonicalBytes.lexicographicallyPrecedes(b.canonicalBytes)
    }

    /// An unambiguous byte encoding of every field: what the state digest hashes.
    package var canonicalBytes: [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(96 + id.utf8.count + stream.utf8.count + payload.utf8.count)
        appendCanonicalBytes(to: &out)
        return out
    }

    /// Appends `canonicalBytes` to `out`: a caller hashing many entries reuses one buffer.
    package func appendCanonicalBytes(to out: inout [UInt8]) {
        out.append(UInt8(ascii: "E"))
        out.appendField(id)
        out.appendField(stream)
        out.append(contentsOf: originDevice.bytes)
        // The replica's 16 bytes appended in place (`dot.replica.bytes` would allocate an array).
        out.appendBigEndian(dot.replica.high)
        out.appendBigEndian(dot.replica.low)
        out.appendBigEndian(dot.counter)
        out.appendBigEndian(hlc.rawValue)
        out.appendBigEndian(UInt64(bitPattern: wallMilliseconds))
        out.appendField(payload)
    }
}

/// One write to a preference: a last-writer-wins register holding a JSON value or a tombstone.
public struct PreferenceWrite: Hashable, Sendable {
    /// The key, lowercase (`caregiver/active`).
    public let key: String
    /// Compact JSON text, or nil for a tombstone (the key was unset).
    public let value: String?
    /// The device that wrote it.
    public let originDevice: DeviceID
    /// The operation that wrote it: the writing replica and its counter.
    public let dot: Dot
    /// The hybrid logical clock reading of the write: the greatest wins.
    public let hlc: HybridTimestamp
    /// Wall-clock time of the write at its origin, milliseconds since the Unix epoch (UTC).
    public let wallMilliseconds: Int64

    package init(
        key: String,
        value: String?,
        originDevice: DeviceID,
        dot: Dot,
        hlc: HybridTimestamp,
        wallMilliseconds: Int64
    ) {
        self.key = key
        self.value = value
        self.originDevice = originDevice
        self.dot = dot
        self.hlc = hlc
        self.wallMilliseconds = wallMilliseconds
    }

    /// Whether this write unset the key.
    public var isTombstone: Bool { value == nil }

    /// Last-writer-wins order: the greater HLC wins, the greater replica ID breaks a tie (then the
    /// counter and the encoded bytes, so the order is total even for malformed input). Keeping the
    /// greatest write is a join: commutative, associative, idempotent.
    package static func loses(_ a: PreferenceWrite, to b: PreferenceWrite) -> Bool {
        if a.hlc != b.hlc { return a.hlc < b.hlc }
        if a.dot != b.dot { return a.dot < b.dot }
        return a.canonicalBytes.lexicographicallyPrecedes(b.canonicalBytes)
    }

    /// An unambiguous byte encoding of every field: what the state digest hashes.
    package var canonicalBytes: [UInt8] {
        var out = [UInt8]()
        out.append(UInt8(ascii: "P"))
        out.appendField(key)
        if let value {
            out.append(1)
            out.appendField(value)
        } else {
            out.append(0)
        }
        out.append(contentsOf: originDevice.bytes)
        out.append(contentsOf: dot.replica.bytes)
        out.appendBigEndian(dot.counter)
        out.appendBigEndian(hlc.rawValue)
        out.appendBigEndian(UInt64(bitPattern: wallMilliseconds))
        return out
    }
}
