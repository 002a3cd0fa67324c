import LANSyncCore

/// A random number generator that one 64-bit seed fixes (the core's `SplitMix64`): every choice
/// a simulation makes comes from one of these, so a seed replays exactly.
package struct SeededRandom: RandomNumberGenerator {
    private var generator: SplitMix64

    package init(seed: UInt64) { generator = SplitMix64(seed: seed) }

    package mutating func next() -> UInt64 { generator.next() }

    /// A generator for one purpose, independent of this one's later draws.
    package mutating func split() -> SeededRandom { SeededRandom(seed: next()) }

    /// True with probability `p`.
    package mutating func chance(_ p: Double) -> Bool { Double.random(in: 0..<1, using: &self) < p }

    /// `count` bytes.
    package mutating func bytes(_ count: Int) -> [UInt8] {
        (0..<count).map { _ in UInt8.random(in: 0...255, using: &self) }
    }
}
