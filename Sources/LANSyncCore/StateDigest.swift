/// A hash of a replica's CRDT state — the set of entries and the winning write of every
/// preference — that is maintained incrementally, so `status` costs nothing on a large replica.
///
/// It is a multiset hash: the sum modulo 2^256 of a 256-bit hash (BLAKE2b in production) of each
/// element's canonical bytes. Adding an element adds its hash; replacing one subtracts the old hash and adds the new.
/// The sum does not depend on the order elements arrived in, so two replicas holding the same
/// elements have the same digest however they got them, and different states differ except with
/// negligible probability. The hash function is injected (`ElementHasher`) to keep this module
/// free of C dependencies.
public struct StateDigest: Hashable, Sendable, CustomStringConvertible {
    /// Four 64-bit limbs, most significant first.
    package private(set) var limbs: [UInt64] = [0, 0, 0, 0]

    package init() {}

    /// Restores a digest from its 32 stored bytes; nil for any other length.
    public init?(bytes: [UInt8]) {
        guard bytes.count == 32 else { return nil }
        limbs = Self.limbs(of: bytes)
    }

    /// The 32 bytes, big-endian.
    public var bytes: [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(32)
        for limb in limbs { out.appendBigEndian(limb) }
        return out
    }

    package mutating func insert(hash: [UInt8]) {
        precondition(hash.count == 32, "an element hash must be 32 bytes")
        var carry: UInt64 = 0
        for index in (0..<4).reversed() {
            let (sum1, overflow1) = limbs[index].addingReportingOverflow(Self.limb(index, of: hash))
            let (sum2, overflow2) = sum1.addingReportingOverflow(carry)
            limbs[index] = sum2
            carry = (overflow1 ? 1 : 0) + (overflow2 ? 1 : 0)
        }
    }

    /// Adds the elements `other` holds (a digest of elements this one does not hold).
    package mutating func add(_ other: StateDigest) {
        var carry: UInt64 = 0
        for index in (0..<4).reversed() {
            let (sum1, overflow1) = limbs[index].addingReportingOverflow(other.limbs[index])
            let (sum2, overflow2) = sum1.addingReportingOverflow(carry)
            limbs[index] = sum2
            carry = (overflow1 ? 1 : 0) + (overflow2 ? 1 : 0)
        }
    }

    package mutating func remove(hash: [UInt8]) {
        precondition(hash.count == 32, "an element hash must be 32 bytes")
        var borrow: UInt64 = 0
        for index in (0..<4).reversed() {
            let (difference1, overflow1) = limbs[index].subtractingReportingOverflow(Self.limb(index, of: hash))
            let (difference2, overflow2) = difference1.subtractingReportingOverflow(borrow)
            limbs[index] = difference2
            borrow = (overflow1 ? 1 : 0) + (overflow2 ? 1 : 0)
        }
    }

    static func limbs(of bytes: [UInt8]) -> [UInt64] {
        precondition(bytes.count == 32, "an element hash must be 32 bytes")
        return (0..<4).map { limb($0, of: bytes) }
    }

    /// Limb `index` (0 most significant) of 32 big-endian bytes.
    @inline(__always) static func limb(_ index: Int, of bytes: [UInt8]) -> UInt64 {
        var value: UInt64 = 0
        for offset in (index * 8)..<(index * 8 + 8) { value = value << 8 | UInt64(bytes[offset]) }
        return value
    }

    /// 64 lowercase hexadecimal digits.
    public var description: String {
        limbs.map { limb in
            let text = String(limb, radix: 16)
            return String(repeating: "0", count: 16 - text.count) + text
        }.joined()
    }
}

/// The hash the digest sums over: BLAKE2b-256 in production (`ReplicaStore.elementHasher`).
package struct ElementHasher: Sendable {
    package let hash: @Sendable ([UInt8]) -> [UInt8]

    package init(_ hash: @escaping @Sendable ([UInt8]) -> [UInt8]) { self.hash = hash }

    package func hash(_ entry: Entry) -> [UInt8] { hash(entry.canonicalBytes) }
    /// The same, with the canonical bytes built in `buffer` (cleared first): a caller hashing
    /// many entries reuses one buffer instead of allocating one per entry.
    @inlinable package func hash(_ entry: Entry, reusing buffer: inout [UInt8]) -> [UInt8] {
        buffer.removeAll(keepingCapacity: true)
        entry.appendCanonicalBytes(to: &buffer)
        return hash(buffer)
    }
    package func hash(_ write: PreferenceWrite) -> [UInt8] { hash(write.canonicalBytes) }
}
