import Foundation
import LANSyncCore
import LANSyncCrypto

/// The identity file, `identity.json` in the data directory, mode 0600: the device ID, its source,
/// the device name and the long-term key pair. When present it wins over any derivation, so a
/// device ID never changes under a running install.
package struct IdentityFile: Sendable {
    package let path: String

    package init(path: String) { self.path = path }

    /// The identity file could not be used.
    package struct Failure: Error, CustomStringConvertible {
        package let path: String
        package let reason: String

        package var description: String { "identity file \(path): \(reason)" }
    }

    private struct Contents: Codable {
        var format = "lansync-identity"
        var version = 1
        var deviceID: DeviceID
        var deviceIDSource: DeviceIDSource
        var name: String
        var publicKey: String
        var secretKey: String

        enum CodingKeys: String, CodingKey {
            case format, version, name
            case deviceID = "device_id"
            case deviceIDSource = "device_id_source"
            case publicKey = "public_key"
            case secretKey = "secret_key"
        }
    }

    /// The stored identity, or nil when there is no identity file.
    package func load() throws(Failure) -> DeviceIdentity? {
        let bytes: [UInt8]?
        do { bytes = try SecretFile.read(path) } catch { throw Failure(path: path, reason: error.description) }
        guard let bytes else { return nil }
        let contents: Contents
        do {
            contents = try JSONDecoder().decode(Contents.self, from: Data(bytes))
        } catch {
            throw Failure(
                path: path,
                reason: "is not a LANSync identity file (\(error)); restore it from a backup, "
                    + "or move it away and run `lansync init` to make a new key pair"
            )
        }
        guard contents.format == "lansync-identity" else {
            throw Failure(path: path, reason: "is not a LANSync identity file")
        }
        guard contents.version == 1 else {
            throw Failure(
                path: path,
                reason: "has version \(contents.version), written by a newer LANSync; upgrade lansync"
            )
        }
        guard var secret = [UInt8](hexString: contents.secretKey), secret.count == KeyPair.secretKeyByteCount,
            let keyPair = try? KeyPair(secretKey: SecureBytes(copying: secret)),
            keyPair.publicKey.hexString == contents.publicKey
        else {
            throw Failure(
                path: path,
                reason: "holds a damaged key pair; move it away and run `lansync init` for a new one"
            )
        }
        for index in secret.indices { secret[index] = 0 }
        return DeviceIdentity(
            deviceID: contents.deviceID,
            source: contents.deviceIDSource,
            name: contents.name,
            keyPair: keyPair
        )
    }

    /// Writes `identity` atomically with mode 0600.
    package func save(_ identity: DeviceIdentity) throws(Failure) {
        let secretHex = identity.keyPair.secretKey.withUnsafeBytes { [UInt8]($0).hexString }
        let contents = Contents(
            deviceID: identity.deviceID,
            deviceIDSource: identity.source,
            name: identity.name,
            publicKey: identity.keyPair.publicKey.hexString,
            secretKey: secretHex
        )
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        do {
            var data = try encoder.encode(contents)
            data.append(0x0A)
            try SecretFile.write([UInt8](data), to: path)
        } catch let error as SecretFile.Failure {
            throw Failure(path: path, reason: error.description)
        } catch {
            throw Failure(path: path, reason: "cannot encode: \(error)")
        }
    }
}

/// Makes a new identity: the device ID from the machine ID when there is one, random otherwise.
package enum IdentityFactory {
    /// A new identity and, when the machine ID could not be used, why (for `init` to say so).
    package static func make(
        name: String,
        machineIDPath: String
    ) -> (DeviceIdentity, DeviceIDDerivation.MachineIDProblem?) {
        let keyPair = KeyPair.generate()
        switch DeviceIDDerivation.deviceID(machineIDPath: machineIDPath) {
        case .success(let deviceID):
            return (DeviceIdentity(deviceID: deviceID, source: .machineID, name: name, keyPair: keyPair), nil)
        case .failure(let problem):
            let deviceID = DeviceIDDerivation.randomDeviceID()
            return (DeviceIdentity(deviceID: deviceID, source: .random, name: name, keyPair: keyPair), problem)
        }
    }
}
