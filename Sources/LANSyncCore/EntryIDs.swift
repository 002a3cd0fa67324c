/// Entry ids generated for appends that bring none: UUIDv7 text (RFC 9562).
///
/// The first 48 bits are the HLC's milliseconds and the next 12 its logical counter, so ids made
/// on one replica sort in the order they were written and inserts append to the end of the
/// B-tree instead of splitting pages at random; 62 random bits keep ids of different replicas apart.
package enum EntryIDs {
    private static let digits = Array("0123456789abcdef".utf8)

    package static func make(hlc: HybridTimestamp) -> String {
        var random = SystemRandomNumberGenerator()
        return make(hlc: hlc, random: &random)
    }

    /// The same with a caller's generator: a batch seeds one `SplitMix64` from the system's
    /// generator instead of making a system call per id.
    package static func make(hlc: HybridTimestamp, random: inout some RandomNumberGenerator) -> String {
        let high = hlc.physicalMilliseconds << 16 | 0x7000 | UInt64(hlc.logical & 0x0FFF)
        let low = (random.next() as UInt64) & 0x3FFF_FFFF_FFFF_FFFF | 0x8000_0000_0000_0000
        // Built as bytes in one buffer: this runs once per append, on the hot path.
        return String(unsafeUninitializedCapacity: 36) { buffer in
            var position = 0
            func put(_ value: UInt64, nibbles: Int) {
                for shift in stride(from: (nibbles - 1) * 4, through: 0, by: -4) {
                    buffer[position] = digits[Int((value >> UInt64(shift)) & 0xF)]
                    position += 1
                }
            }
            func dash() {
                buffer[position] = UInt8(ascii: "-")
                position += 1
            }
            put(high >> 32, nibbles: 8)
            dash()
            put(high >> 16, nibbles: 4)
            dash()
            put(high, nibbles: 4)
            dash()
            put(low >> 48, nibbles: 4)
            dash()
            put(low, nibbles: 12)
            return position
        }
    }
}

/// SplitMix64 (Steele, Lea, Flood 2014): a small, fast generator whose 64-bit outputs are well
/// spread. Seeded from the system's generator; used only where uniqueness, not secrecy, matters.
package struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    package init(seed: UInt64) { state = seed }

    package init() {
        var system = SystemRandomNumberGenerator()
        state = system.next()
    }

    package mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

extension Delta {
    /// The greatest HLC reading among the delta's rows: what a receiver checks against its skew bound.
    package var newestHLC: HybridTimestamp {
        max(
            entries.lazy.map(\.hlc).max() ?? .zero,
            preferences.lazy.map(\.hlc).max() ?? .zero,
            rows.lazy.map(\.hlc).max() ?? .zero
        )
    }
}
