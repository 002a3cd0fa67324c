/// A hybrid logical clock reading: physical milliseconds since the Unix epoch in the high 48 bits,
/// a logical counter in the low 16. Ordered as one 64-bit integer.
///
/// HLC readings order last-writer-wins writes: they follow real time where clocks agree, and stay
/// causal where they do not (a write made after seeing another is always ordered after it).
public struct HybridTimestamp: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The reading as one number: milliseconds in the high 48 bits, the logical counter in the low 16.
    public let rawValue: UInt64

    package init(rawValue: UInt64) { self.rawValue = rawValue }

    package init(physicalMilliseconds: UInt64, logical: UInt16) {
        rawValue = physicalMilliseconds << 16 | UInt64(logical)
    }

    package static let zero = HybridTimestamp(rawValue: 0)

    /// The largest millisecond count the 48-bit physical field holds (the year 10889). Wall-clock
    /// readings from peers are checked against it, so differences of two stay inside 64 bits.
    package static let maxPhysicalMilliseconds: UInt64 = (1 << 48) - 1

    /// Milliseconds since the Unix epoch.
    public var physicalMilliseconds: UInt64 { rawValue >> 16 }
    /// The logical counter: orders writes within one millisecond, or ahead of a clock that lags.
    public var logical: UInt16 { UInt16(truncatingIfNeeded: rawValue) }

    public static func < (a: HybridTimestamp, b: HybridTimestamp) -> Bool { a.rawValue < b.rawValue }

    public var description: String { "\(physicalMilliseconds).\(logical)" }
}

/// A reading from a peer was too far ahead of our clock to be trusted.
package struct ClockSkewError: Error, Equatable, CustomStringConvertible {
    package let remote: HybridTimestamp
    package let localMilliseconds: UInt64
    package let boundMilliseconds: UInt64

    package var aheadMilliseconds: UInt64 { remote.physicalMilliseconds &- localMilliseconds }

    package var description: String {
        "clock skew: the peer's clock is \(aheadMilliseconds) ms ahead of ours (the bound is \(boundMilliseconds) ms); "
            + "fix the clock of the machine that is wrong (timedatectl, NTP)"
    }
}

/// The hybrid logical clock of one replica.
///
/// Invariants: `last` never decreases; every reading `tick` returns is greater than every reading
/// returned or observed before; an observed reading more than `maxSkew` ahead of the physical
/// clock is refused, so a peer with a clock far in the future cannot push ours (and its
/// last-writer-wins writes) ahead forever.
package struct HybridLogicalClock: Sendable {
    /// The greatest reading issued or observed.
    package private(set) var last: HybridTimestamp

    package init(last: HybridTimestamp = .zero) { self.last = last }

    /// A new reading for a local event at physical time `now` (ms since the epoch).
    package mutating func tick(now: UInt64) -> HybridTimestamp {
        if now > last.physicalMilliseconds {
            last = HybridTimestamp(physicalMilliseconds: now, logical: 0)
        } else if last.logical < UInt16.max {
            last = HybridTimestamp(rawValue: last.rawValue + 1)
        } else {
            // The logical counter is spent: borrow the next millisecond rather than wrap.
            last = HybridTimestamp(physicalMilliseconds: last.physicalMilliseconds + 1, logical: 0)
        }
        return last
    }

    /// Takes in a reading from another replica, after checking it is not too far in the future.
    package mutating func observe(_ remote: HybridTimestamp, now: UInt64, maxSkew: UInt64) throws(ClockSkewError) {
        try Self.check(remote, now: now, maxSkew: maxSkew)
        if remote > last { last = remote }
    }

    /// Throws when `remote` is more than `maxSkew` milliseconds ahead of `now`.
    package static func check(_ remote: HybridTimestamp, now: UInt64, maxSkew: UInt64) throws(ClockSkewError) {
        if remote.physicalMilliseconds > now &+ maxSkew {
            throw ClockSkewError(remote: remote, localMilliseconds: now, boundMilliseconds: maxSkew)
        }
    }
}
