import Foundation
import LANSyncCore
package import LANSyncCrypto
package import LANSyncIdentity
import LANSyncStore

/// A member device as the group's records say (`lansync group members`).
///
/// The records are preferences under `lansync/`, so they sync, relay and survive like any other
/// data, and apps cannot write them (see `LANSyncNode.set`):
/// - `lansync/member/DEVICE`: what a person did to add a device: created the group on it, or
///   vouched for it (`group invite`). Written by that device or by the vouching member's.
/// - `lansync/seen/DEVICE/BY`: the key device BY saw DEVICE present in a handshake. Each member
///   writes only its own observations, so two members meeting a newcomer at once never overwrite
///   each other, nor a member record.
/// - `lansync/epoch/N`: one removal (`EpochRecord`), signed by the remover: removals are read
///   from these alone.
/// - `lansync/keys/DEVICE/SIGNINGKEY/BY`: a signing key the group pinned for DEVICE, as member BY
///   saw it pinned (written by BY only, never for itself). One record per key and member, never
///   overwritten by another: a device's keys ever are a grow-only set, so the replicas it wrote
///   before a reinstall verify on every device, whoever vouched for it since and whatever that
///   member knew.
/// A device's pinned key is its member record's, or else the first observation (made after the
/// record, when a vouch reset the key).
package struct GroupMember: Codable, Sendable, Equatable {
    package var deviceID: String
    package var name: String
    /// The device's static key (hex) as the group pinned it: a handshake with another key is
    /// refused until a member vouches for the device again. nil: vouched for, key not seen yet
    /// (the first member it connects to pins the key it presents).
    package var key: String?
    /// The device's Ed25519 signing key (hex), seen with `key`: what its records are checked with.
    package var signingKey: String?
    /// The signing keys the group pinned for this device before a member vouched for it again
    /// (a reinstall re-keys a device): its replicas from before still verify with them, so a
    /// device that joins later can take what the device wrote then. The vouching member carries
    /// them over from the record it replaces, with the key pinned until then.
    package var signingKeysBefore: [String]?
    package var addedBy: String?
    package var addedAt: String?
    /// How it came in: "created the group", "short code" (vouched for by `addedBy`), "group secret"
    /// (a join code; `addedBy` is the first member that saw it).
    package var via: String
    package var removedBy: String?
    package var removedAt: String?
    /// The epoch its removal started.
    package var removedInEpoch: UInt64?
    /// When the device said it left the group (`lansync group leave`), from its own
    /// `lansync/left/DEVICE` record; nil once it said it joined again.
    package var leftAt: String?

    package var isRemoved: Bool { removedBy != nil }
    /// Whether the device took itself out of the group (it dropped the group's secret).
    package var hasLeft: Bool { leftAt != nil }
    /// A member the group still counts: neither removed nor gone of its own accord.
    package var isPresent: Bool { !isRemoved && !hasLeft }

    /// Every signing key the group pinned for this device, each once: those before, then the current one.
    package var signingKeysEver: [String] {
        var keys: [String] = []
        for key in (signingKeysBefore ?? []) + [signingKey].compactMap({ $0 }) where !keys.contains(key.lowercased()) {
            keys.append(key.lowercased())
        }
        return keys
    }

    package init(
        deviceID: String,
        name: String,
        key: String?,
        signingKey: String? = nil,
        addedBy: String?,
        addedAt: String?,
        via: String
    ) {
        self.deviceID = deviceID
        self.name = name
        self.key = key
        self.signingKey = signingKey
        self.addedBy = addedBy
        self.addedAt = addedAt
        self.via = via
    }

    enum CodingKeys: String, CodingKey {
        case deviceID = "device_id", name, key, signingKey = "signing_key", signingKeysBefore = "signing_keys_before"
        case addedBy = "added_by", addedAt = "added_at", via
        case removedBy = "removed_by", removedAt = "removed_at", removedInEpoch = "removed_in_epoch"
        case leftAt = "left_at"
    }

    /// The 16-hex-digit fingerprint shown for a key: the start of its SHA-256.
    package static func fingerprint(_ keyHex: String) -> String {
        guard let key = [UInt8](hexString: keyHex) else { return "?" }
        return Array(SHA256.hash(key).prefix(8)).hexString
    }
}

/// One removal: the epoch it starts, who was removed, and the new secret sealed to each member
/// that stays (`SealedBox` to its pinned key), so any of them can hand it on.
package struct EpochRecord: Codable, Sendable, Equatable {
    package var epoch: UInt64
    package var removed: [String]
    package var by: String
    package var at: String
    /// The new secret's group tag (a keyed hash, `GroupSecret.tag`): a device that joined with
    /// that secret learns from it which epoch it is in.
    package var tag: String
    /// Device ID → the epoch's secret sealed to that device's pinned key, base64.
    package var sealed: [String: String]
    /// The remover's Ed25519 signature of `signedText`, base64: a member relaying the record can
    /// neither forge one in another member's name nor alter it.
    package var signature: String?

    package init(
        epoch: UInt64,
        removed: [String],
        by: String,
        at: String,
        tag: String,
        sealed: [String: String],
        signature: String? = nil
    ) {
        self.epoch = epoch
        self.removed = removed
        self.by = by
        self.at = at
        self.tag = tag
        self.sealed = sealed
        self.signature = signature
    }

    /// What the remover signs: every field but the signature, one per line, lists sorted.
    package var signedText: [UInt8] {
        let lines =
            ["lansync epoch record v1", String(epoch), removed.sorted().joined(separator: ","), by, at, tag]
            + sealed.keys.sorted().map { "\($0)=\(sealed[$0]!)" }
        return Array(lines.joined(separator: "\n").utf8)
    }

    /// Whether the record carries a valid signature by `signingKeyHex`.
    package func isSigned(by signingKeyHex: String?) -> Bool {
        guard let signingKeyHex, let key = [UInt8](hexString: signingKeyHex), let signature,
            let bytes = Data(base64Encoded: signature)
        else { return false }
        return SigningKey.verify([UInt8](bytes), of: signedText, by: key)
    }
}

/// The value of `lansync/keys/DEVICE/KEY`: when and by whom the key was seen pinned (the key
/// itself is in the record's key).
package struct PinnedKey: Codable, Sendable, Equatable {
    package var at: String
    package var by: String
}

/// One member's observation of another's key.
package struct KeyObservation: Codable, Sendable, Equatable {
    package var name: String
    package var key: String
    /// The signing key its `Hello` carried with that key (absent before protocol version 3).
    package var signingKey: String?
    package var at: String

    enum CodingKeys: String, CodingKey { case name, key, signingKey = "signing_key", at }

    package init(name: String, key: String, signingKey: String?, at: String) {
        self.name = name
        self.key = key
        self.signingKey = signingKey
        self.at = at
    }
}

/// The value of `lansync/left/DEVICE`, written by DEVICE alone: it left the group (`lansync group
/// leave`), or joined it again since (`left` false). Members show it; a record of this key written
/// by any other device counts for nothing.
package struct LeftRecord: Codable, Sendable, Equatable {
    package var left: Bool
    package var name: String
    package var at: String
}

/// The keys the records live under.
package enum MemberKeys {
    package static let prefix = PreferenceWrite.reservedPrefix
    package static let seenPrefix = prefix + "seen/"
    package static func seen(_ device: String, by observer: String) -> String {
        seenPrefix + device.lowercased() + "/" + observer.lowercased()
    }
    package static let memberPrefix = prefix + "member/"
    package static let leftPrefix = prefix + "left/"
    package static func left(_ device: String) -> String { leftPrefix + device.lowercased() }
    package static let epochPrefix = prefix + "epoch/"

    package static func member(_ device: String) -> String { memberPrefix + device.lowercased() }
    package static func epoch(_ number: UInt64) -> String { epochPrefix + String(number) }
    package static let keysPrefix = prefix + "keys/"
    package static func pinnedKey(_ device: String, _ signingKey: String, by member: String) -> String {
        keysPrefix + device.lowercased() + "/" + signingKey.lowercased() + "/" + member.lowercased()
    }
}

extension LANSyncNode {
    /// The group's epochs as this device's group file holds them, or nil outside a group.
    package func groupEpochs() throws(LANSyncError) -> GroupEpochs? {
        do { return try groupFile.loadEpochs() } catch { throw LANSyncError(.unusableData, error.description) }
    }

    /// Every member device, from the member records and the key observations; removed members
    /// included. `key` is the pinned key.
    package func members() throws(LANSyncError) -> [GroupMember] { try membership().members }

    /// The member devices, and the epoch records that count: signed by their remover's pinned
    /// signing key, by a remover not removed by an earlier one, oldest first.
    func membership() throws(LANSyncError) -> (members: [GroupMember], epochs: [EpochRecord]) {
        let records = try records()
        var derived = GroupMembership.derive(
            from: records.compactMap { write in write.value.map { (write.key, $0, write.hlc) } }
        )
        derived.members = GroupMembership.applyLeaving(records, to: derived.members)
        return derived
    }

    /// Every removal record, oldest epoch first (signed or not).
    package func epochRecords() throws(LANSyncError) -> [EpochRecord] {
        GroupMembership.epochRecords(
            in: try records().compactMap { write in write.value.map { (write.key, $0, write.hlc) } }
        )
    }

    /// Every write under `lansync/`: the group's records.
    package func records() throws(LANSyncError) -> [PreferenceWrite] {
        do { return try store.preferences(withPrefix: MemberKeys.prefix) } catch { throw Self.translate(error) }
    }

    package func member(_ device: DeviceID) throws(LANSyncError) -> GroupMember? {
        try members().first { $0.deviceID == device.description }
    }

    /// Records the keys this device saw `device` present (once per pair of keys).
    /// Returns whether it wrote (and attested the keys the records then pin, `recordPinnedKeys`).
    @discardableResult
    package func observe(
        _ device: DeviceID,
        name: String,
        key: String,
        signingKey: String?
    ) async throws(LANSyncError) -> Bool {
        let record = observation(of: device, name: name, key: key, signingKey: signingKey)
        if let value = try preference(record.key),
            let held = try? JSONDecoder().decode(KeyObservation.self, from: Data(value.utf8)),
            held.key == key, held.signingKey == signingKey
        {
            return false
        }
        try await writeRecords([(record.key, Self.json(record.observation))])
        try await recordPinnedKeys()
        return true
    }

    /// Writes `lansync/keys/DEVICE/KEY` for every signing key the records pin now that has none
    /// yet (one commit; nothing when all are there): after an admission pins a key, before a
    /// vouch replaces a member record, and when an agent starts (history from before these
    /// records existed).
    /// `also`: keys pinned by device (device ID → signing keys), such as those a merge verified
    /// with before its records changed. With `onlyThose` (a merge: `also` holds every key the
    /// records pin, before and after it), nothing is read when each is known to be held.
    package func recordPinnedKeys(
        also extra: [String: Set<String>] = [:],
        onlyThose: Bool = false
    ) async throws(LANSyncError) {
        // Each member attests for itself, in its own replica, and never for its own device: a
        // record that only the device's own replica holds could not help anyone verify it.
        let me = deviceID.description.lowercased()
        var wanted = Set(
            extra.filter { $0.key.lowercased() != me }.flatMap { device, keys in
                keys.map { MemberKeys.pinnedKey(device, $0, by: me) }
            }
        )
        let known = attestedKeys.withLock { $0 }
        if onlyThose, wanted.isSubset(of: known) { return }
        for member in try members() where member.deviceID.lowercased() != me {
            for signingKey in member.signingKeysEver {
                wanted.insert(MemberKeys.pinnedKey(member.deviceID, signingKey, by: me))
            }
        }
        let held = Set(try records().filter { $0.key.hasPrefix(MemberKeys.keysPrefix) && $0.value != nil }.map(\.key))
        let missing = wanted.subtracting(held).sorted()
        if !missing.isEmpty {
            let value = Self.json(PinnedKey(at: nowText, by: deviceID.description))
            try await writeRecords(missing.map { ($0, value) })
        }
        attestedKeys.withLock { $0.formUnion(held.union(missing)) }
    }

    /// Records this device's own keys, as the others will see them, and which key signs this
    /// replica's chain (`ReplicaRecord`).
    package func observeSelf() async throws(LANSyncError) {
        let observed = try await observe(
            deviceID,
            name: identity.name,
            key: identity.publicKeyHex,
            signingKey: identity.signingKey.publicKey.hexString
        )
        try await recordReplica()
        // An agent's start attests what the records pin (history from before these records).
        if !observed { try await recordPinnedKeys() }
    }

    /// This device's observation of `device`, and the key it is filed under.
    private func observation(
        of device: DeviceID,
        name: String,
        key: String,
        signingKey: String?
    ) -> (key: String, observation: KeyObservation) {
        (
            MemberKeys.seen(device.description, by: deviceID.description),
            KeyObservation(name: name, key: key, signingKey: signingKey, at: nowText)
        )
    }

    /// This device's observation of itself, as a record to write.
    var selfObservation: (key: String, json: String) {
        let record = observation(
            of: deviceID,
            name: identity.name,
            key: identity.publicKeyHex,
            signingKey: identity.signingKey.publicKey.hexString
        )
        return (record.key, Self.json(record.observation))
    }

    /// Writes a member record (the records' own writer; apps cannot write under `lansync/`).
    package func record(_ member: GroupMember) async throws(LANSyncError) {
        try await writeRecords([(MemberKeys.member(member.deviceID), Self.json(member))])
    }

    /// Vouches for `device` (a pairing run let it in): a member record whose key the device's
    /// first connection pins, carrying over the signing keys pinned for it before, so that what
    /// it wrote under an earlier key still verifies everywhere.
    package func vouch(for device: DeviceID, name: String, at milliseconds: Int64? = nil) async throws(LANSyncError) {
        var record = GroupMember(
            deviceID: device.description,
            name: name,
            key: nil,
            addedBy: deviceID.description,
            addedAt: Timestamps.iso8601(milliseconds: milliseconds ?? Int64(clock.now())),
            via: "short code"
        )
        try await recordPinnedKeys()
        if let before = try member(device)?.signingKeysEver, !before.isEmpty { record.signingKeysBefore = before }
        try await self.record(record)
    }

    /// Records this device as the group's creator.
    package func recordCreator() async throws(LANSyncError) {
        try await record(
            GroupMember(
                deviceID: deviceID.description,
                name: identity.name,
                key: identity.publicKeyHex,
                signingKey: identity.signingKey.publicKey.hexString,
                addedBy: nil,
                addedAt: nowText,
                via: "created the group"
            )
        )
    }

    /// Writes records in one commit.
    func writeRecords(_ records: [(key: String, json: String)]) async throws(LANSyncError) {
        do {
            let feed = feed
            _ = try await store.setPreferences(
                records.map { PreferenceRequest(key: $0.key, value: $0.json) },
                now: clock.now()
            ) {
                feed.publish(.preferences($0, local: true))
            }
        } catch {
            throw Self.translate(error)
        }
    }

    static func json(_ value: some Encodable) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: (try? encoder.encode(value)) ?? Data("{}".utf8), as: UTF8.self)
    }

    var nowText: String { Timestamps.iso8601(milliseconds: Int64(clock.now())) }

    /// What a removal did, for the CLI to say.
    package struct Removal: Sendable {
        package let removed: GroupMember
        package let epoch: UInt64
        /// Members that stay and got the new secret sealed to their key.
        package let sealedFor: [GroupMember]
        /// Members that stay but have no pinned key yet: they cannot open the new secret and need
        /// `lansync group invite` again.
        package let withoutKey: [GroupMember]
    }

    /// Removes a member device: records the removal, starts a new epoch with a fresh secret sealed
    /// to every remaining member's pinned key, and switches this device to it. A running agent
    /// picks the new epoch up (the CLI tells it); members that were away get it from any member
    /// they meet.
    package func removeMember(_ device: DeviceID) async throws(LANSyncError) -> Removal {
        guard let epochs = try groupEpochs() else {
            throw LANSyncError(.invalidInput, "this device is in no group; there is nobody to remove")
        }
        guard device != deviceID else {
            throw LANSyncError(
                .invalidInput,
                "this is this device; to take it out of the group run `lansync group leave` here"
            )
        }
        let all = try members()
        guard var removed = all.first(where: { $0.deviceID == device.description }) else {
            throw LANSyncError(
                .invalidInput,
                "no member has device ID \(device); `lansync group members` lists them (a device this group never saw needs no removal)"
            )
        }
        guard !removed.isRemoved else {
            throw LANSyncError(
                .invalidInput,
                "\(removed.name) (\(device)) was removed already, by \(removed.removedBy ?? "?") at \(removed.removedAt ?? "?")"
            )
        }
        if let me = all.first(where: { $0.deviceID == deviceID.description }), let pinned = me.key,
            pinned != identity.publicKeyHex
        {
            // The others would not count a removal signed with a key the group did not pin.
            throw LANSyncError(
                .invalidInput,
                "the group pinned another key for this device (it was reinstalled); a member must vouch for it with "
                    + "`lansync group invite` before it can remove anyone"
            )
        }
        let staying = all.filter { !$0.isRemoved && $0.deviceID != device.description }
        // A device that joined with a code does not know its epoch's number: the records do.
        let next = max(epochs.epoch, try epochRecords().last?.epoch ?? 0) + 1
        let secret = GroupSecret.generate()
        var sealed: [String: String] = [:]
        var sealedFor = [GroupMember]()
        var withoutKey = [GroupMember]()
        for member in staying {
            guard let keyHex = member.key, let key = [UInt8](hexString: keyHex), key.count == KeyPair.publicKeyByteCount
            else {
                withoutKey.append(member)
                continue
            }
            do {
                sealed[member.deviceID] = Data(try SealedBox.seal(secret.secret, to: key)).base64EncodedString()
            } catch {
                throw LANSyncError(.storage, "cannot seal the new secret for \(member.name): \(error)")
            }
            sealedFor.append(member)
        }
        let now = nowText
        removed.removedBy = deviceID.description
        removed.removedAt = now
        removed.removedInEpoch = next
        var record = EpochRecord(
            epoch: next,
            removed: [device.description],
            by: deviceID.description,
            at: now,
            tag: secret.tag,
            sealed: sealed
        )
        record.signature = Data(identity.signingKey.sign(record.signedText)).base64EncodedString()
        // The group file first: if writing the records then failed, this device would be in an
        // epoch nobody else can learn, and running the command again starts another one. The
        // records first would leave the removed device still able to connect here.
        do {
            try groupFile.save(epochs.advanced(to: next, secret: secret), joined: groupFile.joined() ?? now)
        } catch {
            throw LANSyncError(.storage, error.description)
        }
        // With this device's own keys, so every member can check the record's signature.
        try await writeRecords([selfObservation, (MemberKeys.epoch(next), Self.json(record))])
        return Removal(removed: removed, epoch: next, sealedFor: sealedFor, withoutKey: withoutKey)
    }

    /// Merges member records a member handed to this device outside a signed range (a pairing
    /// welcome, or the records of a new epoch handed to a member that was away), through every
    /// check a peer's write passes but without counting coverage (`ReplicaStore.mergeUncovered`:
    /// the writers' signed ranges bring them again, verifiably); then takes a newer epoch they
    /// seal to this device, or learns its epoch's number. Records outside `lansync/` are refused
    /// whole. Returns how many changed something.
    ///
    /// Only what a hand-over needs is taken (`handOverTakes`): epoch records, and the member and
    /// key records of devices this device knows nothing of yet. Unchecked by any signed range,
    /// a member record for a device it knows could pin another key for it and lock it out; a
    /// replica record could bind a replica to another key; a write in this device's own replica
    /// would be a change it never made. Those wait for their writers' signed ranges.
    package func mergeHandedRecords(_ records: [PreferenceWrite]) async throws(LANSyncError) -> Int {
        if let stray = records.first(where: { !$0.key.hasPrefix(MemberKeys.prefix) }) {
            throw LANSyncError(
                .invalidInput,
                "a handed-over record \(stray.key) is not a member record; nothing was merged"
            )
        }
        try checkClock(records.map(\.hlc).max() ?? .zero, maxSkewMilliseconds: Self.recordClockSkewMilliseconds)
        let known = Set(try members().map { $0.deviceID.uppercased() })
        let taken = records.filter { Self.handOverTakes($0, known: known, own: replicaID) }
        guard !taken.isEmpty else { return 0 }
        let result: MergeResult
        do { result = try await store.mergeUncovered(taken) } catch { throw Self.translate(error) }
        publish(result)
        _ = try adoptNewerEpoch(keyPair: identity.keyPair)
        return result.preferences.count
    }

    /// Whether a handed-over record is one a hand-over may bring (see `mergeHandedRecords`).
    static func handOverTakes(_ record: PreferenceWrite, known: Set<String>, own: ReplicaID) -> Bool {
        guard record.dot.replica != own else { return false }
        if record.key.hasPrefix(MemberKeys.epochPrefix) { return true }
        // The device a member, observation or key record is about: the key's segment after its prefix.
        for prefix in [MemberKeys.memberPrefix, MemberKeys.seenPrefix, MemberKeys.keysPrefix]
        where record.key.hasPrefix(prefix) {
            return !known.contains(record.key.dropFirst(prefix.count).prefix { $0 != "/" }.uppercased())
        }
        return false
    }

    /// How far ahead of this device's clock a handed-over record may be: as for a peer (2 min).
    static let recordClockSkewMilliseconds: UInt64 = 2 * 60 * 1000

    /// Takes the newest epoch an epoch record seals to this device (`keyPair` is its static key),
    /// when it is newer than the group file's, or learns its epoch's number from the records:
    /// returns the epoch now in the group file, or nil when nothing changed.
    package func adoptNewerEpoch(keyPair: KeyPair) throws(LANSyncError) -> UInt64? {
        guard var epochs = try groupEpochs() else { return nil }
        let records = try membership().epochs
        var relabelled = false
        if let own = records.last(where: { $0.tag == epochs.current.tag }), own.epoch > epochs.epoch {
            // Joined with a code of a later epoch: the records say which.
            epochs.epoch = own.epoch
            relabelled = true
        }
        var current = epochs
        for record in records where record.epoch > current.epoch {
            guard let box = record.sealed[deviceID.description].flatMap({ Data(base64Encoded: $0) }),
                let secret = SealedBox.open([UInt8](box), with: keyPair), secret.count == 32
            else { continue }
            current = current.advanced(to: record.epoch, secret: GroupSecret(secret: secret))
        }
        guard current.epoch > epochs.epoch || relabelled else { return nil }
        do {
            try groupFile.save(current, joined: groupFile.joined() ?? nowText)
        } catch {
            throw LANSyncError(.storage, error.description)
        }
        return current.epoch
    }
}

/// The group's membership as its records say (protocol §11), derived from the records alone: a
/// pure function, so every rule is tested without a replica, and every member holding the same
/// records derives the same members.
package enum GroupMembership {
    /// The member devices (removed ones included; `key` and `signingKey` are the pinned keys), and
    /// the epoch records that count, oldest first, from the `lansync/` preferences (key, value,
    /// and the HLC stamp of the write).
    ///
    /// "After a vouch" is decided by the writes' HLC stamps, not by the wall-clock times the
    /// records carry: a member that merged a vouch and then saw the device's new key stamps its
    /// observation later than the vouch even when its clock runs behind the voucher's.
    package static func derive(
        from records: [(key: String, value: String, stamp: HybridTimestamp)]
    ) -> (members: [GroupMember], epochs: [EpochRecord]) {
        var memberRecords: [String: (record: GroupMember, stamp: HybridTimestamp)] = [:]
        var epochStamps: [UInt64: HybridTimestamp] = [:]
        var seen: [String: [(by: String, observation: KeyObservation, stamp: HybridTimestamp)]] = [:]
        var pinnedBefore: [String: [String]] = [:]
        let decoder = JSONDecoder()
        for (key, value, stamp) in records {
            if key.hasPrefix(MemberKeys.memberPrefix),
                let record = try? decoder.decode(GroupMember.self, from: Data(value.utf8)),
                MemberKeys.member(record.deviceID) == key
            {
                memberRecords[record.deviceID] = (record, stamp)
            } else if key.hasPrefix(MemberKeys.epochPrefix),
                let epoch = UInt64(key.dropFirst(MemberKeys.epochPrefix.count))
            {
                epochStamps[epoch] = stamp
            } else if key.hasPrefix(MemberKeys.keysPrefix) {
                // A device's attestation of its own key counts for nothing (only its own replica holds it).
                let parts = key.dropFirst(MemberKeys.keysPrefix.count).split(separator: "/")
                guard parts.count == 3, parts[0] != parts[2] else { continue }
                pinnedBefore[parts[0].uppercased(), default: []].append(String(parts[1]))
            } else if key.hasPrefix(MemberKeys.seenPrefix),
                let observation = try? decoder.decode(KeyObservation.self, from: Data(value.utf8))
            {
                let parts = key.dropFirst(MemberKeys.seenPrefix.count).split(separator: "/")
                guard parts.count == 2 else { continue }
                seen[parts[0].uppercased(), default: []].append((parts[1].uppercased(), observation, stamp))
            }
        }
        var members: [String: GroupMember] = [:]
        for device in Set(memberRecords.keys).union(seen.keys) {
            let observations = (seen[device] ?? []).sorted { ($0.observation.at, $0.by) < ($1.observation.at, $1.by) }
            var member: GroupMember
            if let (record, vouched) = memberRecords[device] {
                member = record
                // The record's own removal fields are not trusted: only signed epoch records remove.
                (member.removedBy, member.removedAt, member.removedInEpoch) = (nil, nil, nil)
                if member.key == nil {
                    // Vouched for: the first key seen since, by the writes' stamps.
                    let first = observations.first { $0.stamp > vouched }?.observation
                    (member.key, member.signingKey) = (first?.key, first?.signingKey)
                }
            } else if let first = observations.first {
                member = GroupMember(
                    deviceID: device,
                    name: observations.last!.observation.name,
                    key: first.observation.key,
                    addedBy: first.by == device ? nil : first.by,
                    addedAt: first.observation.at,
                    via: "group secret"
                )
            } else {
                continue
            }
            if member.signingKey == nil, let key = member.key {
                member.signingKey =
                    observations.first { $0.observation.key == key && $0.observation.signingKey != nil }?.observation
                    .signingKey
            }
            // Keys pinned before, from the vouch and from the grow-only key records.
            let current = member.signingKey?.lowercased()
            var before = member.signingKeysBefore ?? []
            for key in (pinnedBefore[device] ?? []).sorted() where key != current && !before.contains(key) {
                before.append(key)
            }
            member.signingKeysBefore = before.isEmpty ? nil : before
            members[device] = member
        }
        // Removals: epoch records signed by a member's pinned signing key, by a remover not
        // removed before, unless a member vouched for the device again afterwards (`group invite`
        // writes a newer member record; an observation is no vouch).
        var valid = [EpochRecord]()
        for record in epochRecords(in: records)
        where members[record.by]?.isRemoved == false && record.isSigned(by: members[record.by]?.signingKey) {
            valid.append(record)
            for device in record.removed {
                guard var member = members[device] else { continue }
                if let vouched = memberRecords[device]?.stamp, vouched > epochStamps[record.epoch] ?? .zero { continue }
                (member.removedBy, member.removedAt, member.removedInEpoch) = (record.by, record.at, record.epoch)
                members[device] = member
            }
        }
        return (members.values.sorted { ($0.name, $0.deviceID) < ($1.name, $1.deviceID) }, valid)
    }

    /// Marks the members that left: `lansync/left/DEVICE`, written by DEVICE itself, says so. Only
    /// the device's own word counts, both ways: it says it is back once it joined again (even a
    /// member's vouch, stamped later by a clock ahead, may come before the leave it would undo).
    package static func applyLeaving(_ records: [PreferenceWrite], to members: [GroupMember]) -> [GroupMember] {
        var left: [String: LeftRecord] = [:]
        let decoder = JSONDecoder()
        for write in records where write.key.hasPrefix(MemberKeys.leftPrefix) {
            let device = String(write.key.dropFirst(MemberKeys.leftPrefix.count)).uppercased()
            guard let value = write.value, write.originDevice.description == device,
                let record = try? decoder.decode(LeftRecord.self, from: Data(value.utf8))
            else { continue }
            left[device] = record
        }
        return members.map { member in
            var member = member
            member.leftAt = left[member.deviceID].flatMap { $0.left ? $0.at : nil }
            return member
        }
    }

    /// Every removal record, oldest epoch first (signed or not).
    package static func epochRecords(
        in records: [(key: String, value: String, stamp: HybridTimestamp)]
    ) -> [EpochRecord] {
        records.compactMap { key, value, _ in
            guard key.hasPrefix(MemberKeys.epochPrefix),
                let record = try? JSONDecoder().decode(EpochRecord.self, from: Data(value.utf8)),
                MemberKeys.epoch(record.epoch) == key
            else { return nil }
            return record
        }.sorted { $0.epoch < $1.epoch }
    }
}
