import CSodium

/// The one place that starts libsodium and turns its return codes into Swift errors.
///
/// `sodium_init()` must run before any other libsodium call; it is safe to call more than once,
/// but calling it once through a lazily initialised global keeps the cost off hot paths.
enum Sodium {
    /// True once libsodium is ready; evaluated on first use, thread-safe by Swift's lazy globals.
    static let ready: Bool = sodium_init() >= 0

    static func ensureReady() {
        precondition(ready, "libsodium failed to initialise (sodium_init returned -1)")
    }

    /// Maps a libsodium return code (0 success, -1 failure) to a thrown `CryptoError`.
    static func check(_ code: CInt, _ operation: StaticString) throws(CryptoError) {
        guard code == 0 else { throw CryptoError.operationFailed(String(describing: operation)) }
    }
}

/// An error from a cryptographic operation.
package enum CryptoError: Error, Equatable, CustomStringConvertible {
    case operationFailed(String)
    case invalidKeyLength(expected: Int, actual: Int)

    package var description: String {
        switch self {
        case .operationFailed(let operation):
            return "libsodium's \(operation) failed"
        case .invalidKeyLength(let expected, let actual):
            return "a key must be \(expected) bytes, this one has \(actual)"
        }
    }
}

extension UnsafeRawBufferPointer {
    /// A byte pointer libsodium accepts even for an empty buffer (whose base address is nil).
    var bytes: UnsafePointer<UInt8> {
        baseAddress?.assumingMemoryBound(to: UInt8.self) ?? UnsafePointer(emptyBytes)
    }
}

/// A valid address for zero-length inputs; never read or written. Immutable, hence `unsafe` is fine.
private nonisolated(unsafe) let emptyBytes = UnsafeMutablePointer<UInt8>.allocate(capacity: 1)
