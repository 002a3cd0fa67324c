import Foundation
package import LANSyncCore
package import LANSyncCrypto
import LANSyncIdentity

/// Which device a replica belongs to, in its own words (docs/signed-changes.md, "Whose key signs a
/// replica"): `lansync/replica/REPLICA` holds the device ID and the signing key that signs the
/// replica's change chain, signed with that key. A receiver checks replica R's chain heads with
/// the key R's record names, and accepts that key only when it is the signing key the group
/// pinned for the record's device: no member can claim another device's replica, since the
/// record must carry that device's signature, nor overwrite a replica's record, since only the
/// replica itself may write under its key (`PreferenceWrite.problem`); and a device's replicas
/// before and after a reinstall each have their own record.
///
/// A derived replica ID (`ReplicaBinding`) is bound to its device: its record counts only when
/// its `nonce` derives the ID from the device it names, so no member can present another
/// device's replica as its own either (and make that device's changes unverifiable to a
/// receiver that had not heard of the replica yet).
package struct ReplicaRecord: Codable, Sendable, Equatable {
    package var deviceID: String
    package var signingKey: String
    /// Base64 of the Ed25519 signature, by `signingKey`, of `signedBytes(replica:)`.
    package var signature: String
    /// The nonce (32 lowercase hex digits) that derives the replica's ID from `deviceID`; absent
    /// for a legacy replica ID.
    package var nonce: String?

    enum CodingKeys: String, CodingKey { case deviceID = "device_id", signingKey = "signing_key", signature, nonce }

    /// "lansync/v1/replica" · replica ID (16 bytes) · device ID (16 bytes) · signing key (32 bytes).
    static func signedBytes(replica: ReplicaID, device: DeviceID, signingKey: [UInt8]) -> [UInt8] {
        Array("lansync/v1/replica".utf8) + replica.bytes + device.bytes + signingKey
    }

    package init(replica: ReplicaID, device: DeviceID, key: SigningKey, nonce: [UInt8]?) {
        deviceID = device.description
        signingKey = key.publicKey.hexString
        signature = Data(key.sign(Self.signedBytes(replica: replica, device: device, signingKey: key.publicKey)))
            .base64EncodedString()
        self.nonce = nonce?.hexString
    }

    /// The signing key this record names for `replica`, when its signature holds and, for a
    /// derived replica ID, its nonce derives the ID from the device it names (a legacy ID's
    /// record has no nonce).
    func verifiedKey(for replica: ReplicaID) -> (device: DeviceID, key: [UInt8])? {
        guard let device = DeviceID(deviceID), let key = [UInt8](hexString: signingKey),
            let signature = Data(base64Encoded: signature),
            SigningKey.verify(
                [UInt8](signature),
                of: Self.signedBytes(replica: replica, device: device, signingKey: key),
                by: key
            )
        else { return nil }
        if ReplicaBinding.isDerived(replica) {
            guard let nonce, nonce.utf8.count == 2 * ReplicaBinding.nonceLength, nonce == nonce.lowercased(),
                let bytes = [UInt8](hexString: nonce), ReplicaBinding.binds(replica, to: device, nonce: bytes)
            else { return nil }
        } else if nonce != nil {
            return nil  // no nonce derives a legacy ID
        }
        return (device, key)
    }
}

extension MemberKeys {
    package static let replicaPrefix = PreferenceWrite.replicaRecordPrefix
    package static func replica(_ replica: ReplicaID) -> String { replicaPrefix + replica.description }
}

extension LANSyncNode {
    /// This replica's record, as a record to write.
    var selfReplicaRecord: (key: String, json: String) {
        (
            MemberKeys.replica(store.replica),
            Self.json(
                ReplicaRecord(
                    replica: store.replica,
                    device: deviceID,
                    key: identity.signingKey,
                    nonce: store.replicaNonce
                )
            )
        )
    }

    /// Writes this replica's record unless it holds it already.
    package func recordReplica() async throws(LANSyncError) {
        let record = selfReplicaRecord
        if try preference(record.key) == record.json { return }
        try await writeRecords([record])
    }

    /// The key that signs each replica's chain, from the replica records whose signature holds
    /// and whose key is the signing key the group pinned for their device (removed devices
    /// included: what they wrote before their removal still verifies).
    ///
    /// `alsoIn`: records that arrive with a delta count too, each checked the same way: those it
    /// merges, and those its ranges carry for their replica's key alone (a range that starts
    /// below its replica's record, which the receiver may not hold yet).
    package func replicaSigningKeys(alsoIn delta: Delta? = nil) throws(LANSyncError) -> [ReplicaID: [UInt8]] {
        // What the records held here say, derived again only when they changed.
        let fingerprint: [Int64]
        do { fingerprint = try store.fingerprint(ofPreferencesWithPrefix: MemberKeys.prefix) } catch {
            throw Self.translate(error)
        }
        var (keys, pinned): ([ReplicaID: [UInt8]], [String: Set<String>])
        if let cached = signingKeyCache.withLock({ $0 }), cached.fingerprint == fingerprint {
            (keys, pinned) = (cached.keys, cached.pinned)
        } else {
            pinned = Dictionary(
                try members().map { member in (member.deviceID.lowercased(), Set(member.signingKeysEver)) },
                uniquingKeysWith: { first, _ in first }
            )
            keys = Self.signingKeys(in: try records().map { ($0.key, $0.value) }, pinned: pinned)
            let derived = (fingerprint, keys, pinned)
            signingKeyCache.withLock { $0 = derived }
        }
        guard let delta else { return keys }
        var arriving: [(key: String, json: String?)] = delta.preferences.map { ($0.key, $0.value) }
        // Every range carries its replica's record; one whose key is held already changes nothing
        // (the held key wins), and reading it costs a JSON decode and a signature check.
        arriving += delta.coverage.compactMap { range in
            keys[range.replica] == nil ? range.record.map { (MemberKeys.replica(range.replica), $0) } : nil
        }
        keys.merge(Self.signingKeys(in: arriving, pinned: pinned)) { held, _ in held }
        return keys
    }

    /// The keys that replica records among `candidates` name, where their signature holds and the
    /// key is one the group pinned for their device, now or before a re-key (`pinned`).
    package static func signingKeys(
        in candidates: [(key: String, json: String?)],
        pinned: [String: Set<String>]
    ) -> [ReplicaID: [UInt8]] {
        var keys: [ReplicaID: [UInt8]] = [:]
        for (key, json) in candidates where key.hasPrefix(MemberKeys.replicaPrefix) {
            guard let replica = ReplicaID(hex: key.dropFirst(MemberKeys.replicaPrefix.count)),
                let json, let record = try? JSONDecoder().decode(ReplicaRecord.self, from: Data(json.utf8)),
                let verified = record.verifiedKey(for: replica),
                pinned[verified.device.description.lowercased()]?.contains(verified.key.hexString) == true
            else { continue }
            keys[replica] = verified.key
        }
        return keys
    }
}

/// Replica records kept from ranges a merge left out because no key it could accept named their
/// replica's signer, at most `limit` (the oldest go first), so that a member sending records of
/// made-up replicas cannot grow them without bound.
struct AwaitingRecords: Sendable {
    static let limit = 1_024
    private(set) var records: [ReplicaID: String] = [:]
    private var order: [ReplicaID] = []

    mutating func keep(_ json: String, of replica: ReplicaID) {
        if records.updateValue(json, forKey: replica) == nil { order.append(replica) }
        while order.count > Self.limit { records[order.removeFirst()] = nil }
    }

    mutating func forget(_ replicas: some Sequence<ReplicaID>) {
        var gone = Set<ReplicaID>()
        for replica in replicas where records.removeValue(forKey: replica) != nil { gone.insert(replica) }
        if !gone.isEmpty { order.removeAll { gone.contains($0) } }
    }
}

extension LANSyncNode {
    /// The replicas left out for want of a key whose range is worth asking for again now: a merge
    /// keeps the records that came with such ranges (`leftOut`), and once a merge changed the
    /// records (`pinned`, the keys pinned after it; nil when it did not), a kept record that
    /// names a key now pinned for its device makes its replica's key known, though the record is
    /// not held here (it travels in the very range that was left out). Records of replicas whose
    /// key the held records name (`held`) are forgotten.
    func awaitingKeys(
        leftOut: Set<ReplicaID>,
        of delta: Delta,
        held: [ReplicaID: [UInt8]],
        pinned: [String: Set<String>]?
    ) -> Set<ReplicaID> {
        var arriving: [ReplicaID: String] = [:]
        if !leftOut.isEmpty {
            for range in delta.coverage where leftOut.contains(range.replica) { arriving[range.replica] = range.record }
            for preference in delta.preferences where preference.key.hasPrefix(MemberKeys.replicaPrefix) {
                if let replica = ReplicaID(hex: preference.key.dropFirst(MemberKeys.replicaPrefix.count)),
                    leftOut.contains(replica),
                    let json = preference.value
                {
                    arriving[replica] = json
                }
            }
        }
        return recordsAwaitingKeys.withLock { awaiting in
            for (replica, json) in arriving { awaiting.keep(json, of: replica) }
            // Most merges (a catch-up's every batch) find nothing waiting: no work per held key.
            guard !awaiting.records.isEmpty else { return [] }
            awaiting.forget(awaiting.records.keys.filter { held[$0] != nil })
            guard let pinned, !awaiting.records.isEmpty else { return [] }
            return Set(
                Self.signingKeys(in: awaiting.records.map { (MemberKeys.replica($0.key), $0.value) }, pinned: pinned)
                    .keys
            )
        }
    }
}
