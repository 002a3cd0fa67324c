import Foundation
public import LANSyncCore
package import LANSyncCrypto

/// Where a device ID came from.
public enum DeviceIDSource: String, Codable, Sendable {
    /// Derived from `/etc/machine-id`: the same on every install on this machine.
    case machineID = "machine-id"
    /// Random, because the machine has no usable machine-id: survives only while the identity file does.
    case random
}

/// A device's identity: its stable device ID, its human name and its long-term key pair.
public struct DeviceIdentity: Sendable {
    /// The device's stable ID.
    public let deviceID: DeviceID
    /// Where the device ID came from: the machine ID, or random.
    public let source: DeviceIDSource
    /// The device's name for people (`therapy-room`).
    public let name: String
    /// The long-term key pair the handshake authenticates with (never leaves the package).
    package let keyPair: KeyPair
    /// The device's signing key, derived from its key pair once (see `SigningKey`).
    package let signingKey: SigningKey

    package init(deviceID: DeviceID, source: DeviceIDSource, name: String, keyPair: KeyPair) {
        self.deviceID = deviceID
        self.source = source
        self.name = name
        self.keyPair = keyPair
        signingKey = SigningKey(derivedFrom: keyPair)
    }
}

/// Derives the device ID from the machine, following systemd's
/// `sd_id128_get_machine_app_specific`: HMAC-SHA256 keyed with the machine ID over an
/// application ID, truncated to 16 bytes. The machine ID itself is never stored or shown, and
/// other applications deriving their own IDs from it get unrelated values.
package enum DeviceIDDerivation {
    /// LANSync's application ID (16 random bytes, fixed forever: changing it changes every device ID).
    static let applicationID: [UInt8] = [
        0x6c, 0x3e, 0x91, 0x0a, 0x5d, 0x24, 0x4b, 0xf7, 0x8e, 0x12, 0xc9, 0x55, 0x03, 0xa8, 0x7f, 0x61,
    ]

    package enum MachineIDProblem: Error, Equatable, Sendable, CustomStringConvertible {
        case missing(path: String)
        case empty(path: String)
        case malformed(path: String)
        case unreadable(path: String, reason: String)

        package var description: String {
            switch self {
            case .missing(let path): return "\(path) does not exist"
            case .empty(let path): return "\(path) is empty"
            case .malformed(let path): return "\(path) does not hold 32 hexadecimal digits"
            case .unreadable(let path, let reason): return "\(path) cannot be read (\(reason))"
            }
        }
    }

    /// The app-specific device ID for the machine ID in the file at `path`.
    package static func deviceID(machineIDPath path: String) -> Result<DeviceID, MachineIDProblem> {
        let bytes: [UInt8]?
        do {
            bytes = try SecretFile.read(path)
        } catch {
            return .failure(.unreadable(path: path, reason: error.description))
        }
        guard let bytes else { return .failure(.missing(path: path)) }
        let text = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        if text.isEmpty { return .failure(.empty(path: path)) }
        guard text.utf8.count == 32, let machineID = [UInt8](hexString: text), machineID.contains(where: { $0 != 0 })
        else { return .failure(.malformed(path: path)) }
        return .success(deviceID(machineID: machineID))
    }

    /// The app-specific device ID for 16 machine-ID bytes.
    package static func deviceID(machineID: [UInt8]) -> DeviceID {
        let mac = SHA256.hmac(key: machineID, message: applicationID)
        return DeviceID(bytes: Array(mac[0..<16]))!
    }

    /// A random device ID, for machines without a machine ID.
    package static func randomDeviceID() -> DeviceID {
        DeviceID(bytes: randomBytes(16))!
    }
}

extension DeviceIdentity {
    /// The package key in hexadecimal, as shown to people and pinned by peers.
    package var publicKeyHex: String { keyPair.publicKey.hexString }

}
