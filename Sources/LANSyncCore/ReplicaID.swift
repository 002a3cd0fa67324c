/// The CRDT actor: one per install of LANSync, never reused. A new one is derived from its
/// device ID and a random nonce, which binds it to that device (`ReplicaBinding`, protocol §11);
/// one made before that rule is 16 random bytes.
///
/// A reinstalled device keeps its device ID but gets a new replica ID, so no `(replica, counter)`
/// pair is ever issued twice. Ordered by its 16 bytes read big-endian, which is the tie-break for
/// last-writer-wins registers and must therefore be the same on every machine.
public struct ReplicaID: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The first and last eight of the 16 bytes, big-endian, so that integer order is byte order.
    package let high: UInt64
    package let low: UInt64

    @usableFromInline package init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// Builds an ID from exactly 16 bytes; nil for any other length. Inlinable, so callers get a
    /// version specialized to their collection: every write transaction reads the replica table.
    @inlinable package init?(bytes: some Collection<UInt8>) {
        guard bytes.count == 16 else { return nil }
        var high: UInt64 = 0
        var low: UInt64 = 0
        for (index, byte) in bytes.enumerated() {
            if index < 8 { high = high << 8 | UInt64(byte) } else { low = low << 8 | UInt64(byte) }
        }
        self.init(high: high, low: low)
    }

    /// Parses the 32-digit hexadecimal form that `description` prints.
    public init?(hex: some StringProtocol) {
        guard hex.utf8.count == 32, let high = UInt64(hex.prefix(16), radix: 16),
            let low = UInt64(hex.suffix(16), radix: 16)
        else { return nil }
        self.init(high: high, low: low)
    }

    /// The 16 bytes, big-endian.
    public var bytes: [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(16)
        out.appendBigEndian(high)
        out.appendBigEndian(low)
        return out
    }

    public static func < (a: ReplicaID, b: ReplicaID) -> Bool { (a.high, a.low) < (b.high, b.low) }

    /// 32 lowercase hexadecimal digits.
    public var description: String {
        let high = String(high, radix: 16)
        let low = String(low, radix: 16)
        return String(repeating: "0", count: 16 - high.count) + high + String(repeating: "0", count: 16 - low.count)
            + low
    }
}

/// One operation's identity: the replica that issued it and that replica's counter (1, 2, 3, …).
public struct Dot: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The replica that made the operation.
    public let replica: ReplicaID
    /// Its place in that replica's sequence of operations, from 1.
    public let counter: UInt64

    package init(replica: ReplicaID, counter: UInt64) {
        self.replica = replica
        self.counter = counter
    }

    public static func < (a: Dot, b: Dot) -> Bool { (a.replica, a.counter) < (b.replica, b.counter) }

    /// The largest counter a replica may issue: 2^40 − 1, a trillion operations. Every counter a
    /// peer sends (in a dot, a coverage range or a version vector) is checked against it where it
    /// is decoded, so sums of counters over thousands of replicas stay far below 2^64, and a
    /// counter always fits the store's 40-bit field (`DotKey`).
    package static let maxCounter: UInt64 = (1 << 40) - 1

    public var description: String { "(\(replica), \(counter))" }
}

extension Array where Element == UInt8 {
    // One append of the value's bytes, not one per byte: these run for every field of every row hashed.
    @inlinable package mutating func appendBigEndian(_ value: UInt64) {
        Swift.withUnsafeBytes(of: value.bigEndian) { append(contentsOf: $0) }
    }

    @inlinable package mutating func appendBigEndian(_ value: UInt32) {
        Swift.withUnsafeBytes(of: value.bigEndian) { append(contentsOf: $0) }
    }

    /// Appends a field as a 4-byte big-endian length then its UTF-8 bytes, so that concatenated
    /// fields can never be confused with each other ("ab"+"c" differs from "a"+"bc").
    /// Appends a slice's bytes in one copy: the generic `append(contentsOf:)` of a slice costs
    /// several times as much for the few bytes of a value, and a bulk insert appends ten a row.
    @inlinable package mutating func appendBytes(_ bytes: ArraySlice<UInt8>) {
        bytes.withUnsafeBufferPointer { append(contentsOf: $0) }
    }

    @inlinable package mutating func appendField(_ text: String) {
        let utf8 = text.utf8
        appendBigEndian(UInt32(utf8.count))
        append(contentsOf: utf8)
    }
}
