import CSodium

/// Secret bytes held in a buffer that is zeroed when released and never printed.
///
/// A final class (not a struct) so there is exactly one copy of the secret in memory and `deinit`
/// can wipe it; `description` shows the length only, so a secret cannot leak into a log line.
package final class SecureBytes: @unchecked Sendable, CustomStringConvertible {
    // Written only in init; @unchecked because a raw pointer is not Sendable by itself.
    private let base: UnsafeMutableRawPointer
    /// The number of secret bytes.
    package let count: Int

    private init(count: Int) {
        self.count = count
        base = UnsafeMutableRawPointer.allocate(byteCount: max(count, 1), alignment: 16)
    }

    /// Copies `bytes` into a fresh secret buffer. The caller should wipe its own copy.
    package convenience init(copying bytes: some ContiguousBytes) {
        let count = bytes.withUnsafeBytes { $0.count }
        self.init(count: count)
        bytes.withUnsafeBytes { source in
            if let address = source.baseAddress { base.copyMemory(from: address, byteCount: count) }
        }
    }

    /// A buffer of `count` bytes from libsodium's CSPRNG.
    package convenience init(randomCount count: Int) {
        Sodium.ensureReady()
        self.init(count: count)
        randombytes_buf(base, count)
    }

    deinit {
        sodium_memzero(base, max(count, 1))
        base.deallocate()
    }

    /// Lends the secret bytes for the duration of `body`; they must not escape it.
    package func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(start: base, count: count))
    }

    /// Compares in constant time (`sodium_memcmp`), so timing reveals nothing about the secret.
    package func constantTimeEquals(_ other: SecureBytes) -> Bool {
        count == other.count && sodium_memcmp(base, other.base, count) == 0
    }

    package var description: String { "SecureBytes(\(count) bytes, redacted)" }
}

extension SecureBytes: ContiguousBytes {}

/// Random bytes from libsodium's CSPRNG, for package values such as replica IDs.
package func randomBytes(_ count: Int) -> [UInt8] {
    Sodium.ensureReady()
    var out = [UInt8](repeating: 0, count: count)
    out.withUnsafeMutableBytes { randombytes_buf($0.baseAddress!, count) }
    return out
}
