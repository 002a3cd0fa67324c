package import LANSyncCore
import LANSyncCrypto

/// How a replica ID is bound to its device (docs/protocol.md §11, "Replica IDs"): a replica ID
/// made since this rule is **derived** from the device ID and a random nonce, so no other device
/// can present it as its own — its replica record must carry a nonce that derives the ID from
/// the device it names, which takes a preimage of BLAKE2b.
///
/// A derived ID starts with the four bytes `lsr1`; the other twelve are the first twelve of
/// BLAKE2b-256("lansync/v1/replica-id" · device ID (16 bytes) · nonce (16 bytes)). IDs made before
/// (sixteen random bytes) are **legacy**: a receiver cannot tell whose they are, and keeps the
/// rule it had for them (docs/threat-model.md). A random ID starts with `lsr1` once in 2^32.
package enum ReplicaBinding {
    /// The first four bytes of every derived replica ID: "lsr1".
    package static let marker: [UInt8] = Array("lsr1".utf8)
    package static let nonceLength = 16

    /// The replica ID that `device` derives with `nonce` (16 bytes).
    package static func replicaID(device: DeviceID, nonce: [UInt8]) -> ReplicaID {
        precondition(nonce.count == nonceLength, "a replica nonce is 16 bytes")
        let hash = BLAKE2b.hash(Array("lansync/v1/replica-id".utf8) + device.bytes + nonce)
        return ReplicaID(bytes: marker + hash.prefix(16 - marker.count))!
    }

    /// Whether `replica` is in the derived form (it must then be derived from its device).
    package static func isDerived(_ replica: ReplicaID) -> Bool { replica.bytes.starts(with: marker) }

    /// Whether `nonce` derives `replica` from `device`.
    package static func binds(_ replica: ReplicaID, to device: DeviceID, nonce: [UInt8]) -> Bool {
        nonce.count == nonceLength && replicaID(device: device, nonce: nonce) == replica
    }
}
