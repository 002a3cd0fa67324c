import Foundation
import LANSync
import LANSyncCore
import LANSyncCrypto
import LANSyncIdentity
import LANSyncStore
import Synchronization
import Testing

/// Member records, removal and epochs in the library (docs/protocol.md §11); the agent's side
/// (who is let in, the hand-over) runs in the cluster test.
@Suite struct MembershipTests {
    /// Everything `node` holds, as one delta.
    static func everything(_ node: LANSyncNode) throws -> Delta {
        try node.store.delta(since: VersionVector(), maxRows: 100_000)
    }

    /// Three devices of one group, each with its member record as the agent writes it.
    static func group() async throws -> [TemporaryNode] {
        let nodes = [
            try TemporaryNode(name: "home"), try TemporaryNode(name: "laptop"), try TemporaryNode(name: "old-tablet"),
        ]
        let secret = try nodes[0].node.createGroup()
        try await nodes[0].node.recordCreator()
        for other in nodes.dropFirst() { try other.node.joinGroup(code: secret.joinCode) }
        for (index, other) in nodes.enumerated().dropFirst() {
            try await nodes[0].node.record(
                GroupMember(
                    deviceID: other.node.deviceID.description,
                    name: ["home", "laptop", "old-tablet"][index],
                    key: other.node.identity.publicKeyHex,
                    addedBy: nodes[0].node.deviceID.description,
                    addedAt: nil,
                    via: "group secret"
                )
            )
        }
        for other in nodes.dropFirst() {
            try await other.node.merge(try everything(nodes[0].node), maxSkewMilliseconds: 60_000)
        }
        return nodes
    }

    /// Each replica's own record names the key that signs its chain (docs/signed-changes.md): a
    /// record another member writes in a replica's name is refused, and one naming a key the group
    /// did not pin for its device counts for nothing.
    @Test func replicaRecordsMapEachReplicaToItsDevicesSigningKey() async throws {
        let nodes = try await Self.group()
        let (home, laptop, tablet) = (nodes[0].node, nodes[1].node, nodes[2].node)
        for node in [home, laptop, tablet] { try await node.observeSelf() }
        for _ in 0..<2 {
            for a in [home, laptop, tablet] {
                for b in [home, laptop, tablet] where a !== b {
                    try await a.merge(try Self.everything(b), maxSkewMilliseconds: 60_000)
                }
            }
        }
        for node in [home, laptop, tablet] {
            let keys = try node.replicaSigningKeys()
            #expect(keys.count == 3)
            for other in [home, laptop, tablet] {
                #expect(keys[other.replicaID] == other.identity.signingKey.publicKey)
            }
        }

        // The tablet writes a record in the laptop's replica's name, claiming its own key.
        let json = String(
            decoding: try JSONEncoder().encode(
                ReplicaRecord(
                    replica: laptop.replicaID,
                    device: tablet.deviceID,
                    key: tablet.identity.signingKey,
                    nonce: nil
                )
            ),
            as: UTF8.self
        )
        let counter = try tablet.store.versionVector()[tablet.replicaID] + 1
        let forged = PreferenceWrite(
            key: MemberKeys.replica(laptop.replicaID),
            value: json,
            originDevice: tablet.deviceID,
            dot: Dot(replica: tablet.replicaID, counter: counter),
            hlc: HybridTimestamp(physicalMilliseconds: 1, logical: 0),
            wallMilliseconds: 1
        )
        #expect(forged.problem() != nil)
        await #expect(throws: LANSyncError.self) {
            try await home.merge(Delta.carrying(forged), maxSkewMilliseconds: 60_000)
        }

        // A replica that says it is the laptop's but signs with a key the group never pinned.
        let stranger = ReplicaID(high: 0xFEED, low: 1)
        let record = ReplicaRecord(
            replica: stranger,
            device: laptop.deviceID,
            key: SigningKey(derivedFrom: KeyPair.generate()),
            nonce: nil
        )
        let claim = PreferenceWrite(
            key: MemberKeys.replica(stranger),
            value: String(decoding: try JSONEncoder().encode(record), as: UTF8.self),
            originDevice: laptop.deviceID,
            dot: Dot(replica: stranger, counter: 1),
            hlc: HybridTimestamp(physicalMilliseconds: 1, logical: 0),
            wallMilliseconds: 1
        )
        #expect(claim.problem() == nil)
        try await home.merge(Delta.carrying(claim), maxSkewMilliseconds: 60_000)
        #expect(try home.preference(MemberKeys.replica(stranger)) != nil)
        #expect(try home.replicaSigningKeys()[stranger] == nil)
        #expect(try home.replicaSigningKeys().count == 3)
    }

    /// A member claims another device's replica, one a device that joined later has not heard
    /// of yet, as its own: it runs a replica with that ID, writes in it and signs it with its own
    /// key, with a record naming itself (with no nonce, and with the owner's nonce copied). A
    /// derived replica ID binds the replica to its device (`ReplicaBinding`), so neither record
    /// counts: the range is not taken, and the owner's own changes still verify and converge.
    @Test func aMemberCannotClaimAnotherDevicesReplica() async throws {
        let nodes = [
            try TemporaryNode(name: "home"), try TemporaryNode(name: "laptop"), try TemporaryNode(name: "tablet"),
        ]
        let (home, laptop, tablet) = (nodes[0].node, nodes[1].node, nodes[2].node)
        let secret = try home.createGroup()
        try await home.recordCreator()
        try await home.observeSelf()
        for node in [laptop, tablet] {
            try node.joinGroup(code: secret.joinCode)
            try await Self.meet(node, home)
        }
        for node in [home, laptop, tablet] { try await node.recordReplica() }
        #expect(ReplicaBinding.isDerived(laptop.replicaID))
        #expect(
            laptop.store.replicaNonce.map { ReplicaBinding.binds(laptop.replicaID, to: laptop.deviceID, nonce: $0) }
                == true
        )
        _ = try await laptop.append(to: "notes", payload: "\"the laptop's\"")
        for (from, to) in [(laptop, home), (tablet, home), (home, tablet), (home, laptop)] {
            try await Self.syncSigned(from, to: to)
        }
        let owners = try #require(try tablet.preference(MemberKeys.replica(laptop.replicaID)))
        let ownersNonce = try JSONDecoder().decode(ReplicaRecord.self, from: Data(owners.utf8)).nonce
        #expect(ownersNonce != nil)

        for copied in [nil, ownersNonce] {
            let late = try TemporaryNode(name: "therapy-room")
            try late.node.joinGroup(code: secret.joinCode)
            try await Self.meet(late.node, home)
            try await Self.meet(late.node, tablet)
            // It met the tablet (it holds its keys) and has heard nothing of the laptop's replica.
            #expect(try late.node.store.versionVector()[laptop.replicaID] == 0)
            let root = NSTemporaryDirectory() + "lansync-claim-\(UUID().uuidString)"
            defer { try? FileManager.default.removeItem(atPath: root) }
            let claimer = try LANSyncNode.create(
                at: DataDirectory(path: root),
                identity: tablet.identity,
                replica: .exactly(laptop.replicaID),
                clock: tablet.clock
            )
            var record = ReplicaRecord(
                replica: laptop.replicaID,
                device: tablet.deviceID,
                key: tablet.identity.signingKey,
                nonce: nil
            )
            record.nonce = copied
            let json = String(decoding: try JSONEncoder().encode(record), as: UTF8.self)
            _ = try await claimer.store.setPreferences(
                [PreferenceRequest(key: MemberKeys.replica(laptop.replicaID), value: json)],
                now: tablet.clock.now()
            )
            _ = try await claimer.append(to: "notes", payload: "\"claimed\"")
            _ = try await claimer.store.extendOwnChain()
            let forged = try claimer.store.signedDelta(since: VersionVector(), maxRows: 100)
            #expect(forged.coverage.map(\.replica) == [laptop.replicaID])

            let outcome = try await late.node.mergeSigned(
                try late.node.store.check(forged, signed: true),
                maxSkewMilliseconds: 60_000
            )
            #expect(outcome.notTaken[laptop.replicaID] == 0, "no key for the claimed replica: its range is not taken")
            #expect(try late.node.replicaSigningKeys()[laptop.replicaID] == nil)
            #expect(try late.node.preference(MemberKeys.replica(laptop.replicaID)) == nil)

            try await Self.syncSigned(home, to: late.node)
            try await Self.syncSigned(late.node, to: home)
            #expect(try late.node.replicaSigningKeys()[laptop.replicaID] == laptop.identity.signingKey.publicKey)
            #expect(
                try late.node.entries().map(\.payload) == ["\"the laptop's\""],
                "the owner's entry, and not the claimer's"
            )
            #expect(try late.node.status().digest == home.status().digest, "the owner's changes verify and converge")
        }
    }

    /// What a replica record must show to count: its signature, a key pinned for its device, and
    /// for a derived ID a nonce that derives it from that device. A legacy ID (made before IDs were
    /// derived) needs no nonce, and a derived-form ID without one counts for nothing.
    @Test func aDerivedReplicaIDCountsOnlyForTheDeviceItIsDerivedFrom() throws {
        let (owner, other) = (
            DeviceID(bytes: [UInt8](repeating: 1, count: 16))!, DeviceID(bytes: [UInt8](repeating: 2, count: 16))!
        )
        let (ownerKey, otherKey) = (
            SigningKey(derivedFrom: KeyPair.generate()), SigningKey(derivedFrom: KeyPair.generate())
        )
        let pinned = [
            owner.description.lowercased(): Set([ownerKey.publicKey.hexString]),
            other.description.lowercased(): Set([otherKey.publicKey.hexString]),
        ]
        let nonce = [UInt8](repeating: 0xAB, count: 16)
        let derived = ReplicaBinding.replicaID(device: owner, nonce: nonce)
        let legacy = ReplicaID(high: 0x0123_4567_89AB_CDEF, low: 7)
        func counts(
            _ replica: ReplicaID,
            _ device: DeviceID,
            _ key: SigningKey,
            _ nonce: [UInt8]?,
            edit: (inout ReplicaRecord) -> Void = { _ in }
        ) throws -> Bool {
            var record = ReplicaRecord(replica: replica, device: device, key: key, nonce: nonce)
            edit(&record)
            let json = String(decoding: try JSONEncoder().encode(record), as: UTF8.self)
            return LANSyncNode.signingKeys(in: [(MemberKeys.replica(replica), json)], pinned: pinned)[replica]
                == key.publicKey
        }
        #expect(try counts(derived, owner, ownerKey, nonce))
        #expect(try !counts(derived, owner, ownerKey, nil), "a derived-form ID needs its nonce")
        #expect(
            try !counts(derived, other, otherKey, nonce),
            "another device cannot present it, even with the owner's nonce"
        )
        #expect(try !counts(derived, other, otherKey, nil))
        #expect(
            try !counts(derived, owner, ownerKey, nonce) { $0.nonce = $0.nonce?.uppercased() },
            "one text form: lowercase hex"
        )
        #expect(try counts(legacy, owner, ownerKey, nil), "a legacy ID keeps the rule it had")
        #expect(try !counts(legacy, owner, ownerKey, nonce), "no nonce derives a legacy ID")
    }

    /// Syncs `to` from `from` in signed ranges, as a session does (ranges not taken are sent again).
    static func syncSigned(_ from: LANSyncNode, to: LANSyncNode) async throws {
        try await from.store.extendOwnChain()
        var known = try to.store.versionVector()
        for _ in 0..<20 {
            let delta = try from.store.signedDelta(since: known, maxRows: 2_000)
            if delta.isEmpty { return }
            known.advance(by: delta.coverage)
            let outcome = try await to.mergeSigned(try to.store.check(delta, signed: true), maxSkewMilliseconds: 60_000)
            for (replica, counter) in outcome.notTaken { known[replica] = counter }
        }
    }

    /// Makes `home` the group's first device, as `lansync group create` and its agent's first
    /// start do: the group, its creator's member record, its own observation.
    static func founding(_ home: LANSyncNode) async throws -> GroupSecret {
        let secret = try home.createGroup()
        try await home.recordCreator()
        try await home.observeSelf()
        return secret
    }

    /// A device joining late that met only `member`: the first delta of its catch-up from there.
    static func catchUp(
        _ late: LANSyncNode,
        joining secret: GroupSecret,
        from member: LANSyncNode
    ) async throws -> Delta {
        try late.joinGroup(code: secret.joinCode)
        try await meet(late, member)
        try await member.store.extendOwnChain()
        return try member.store.signedDelta(since: try late.store.versionVector(), maxRows: 2_000)
    }

    /// Two devices that met in a handshake: each records the keys the other presented, and its own.
    static func meet(_ device: LANSyncNode, _ member: LANSyncNode) async throws {
        for (one, other) in [(device, member), (member, device)] {
            try await one.observe(
                other.deviceID,
                name: other.identity.name,
                key: other.identity.publicKeyHex,
                signingKey: other.identity.signingKey.publicKey.hexString
            )
            try await one.observeSelf()
        }
    }

    /// The issue's first flow: a device that was reinstalled (same machine, new keys) and vouched
    /// for again wrote under two signing keys; a device that joins later gets what it wrote under
    /// both, because the vouch carries the key pinned before it over.
    @Test func aReinstalledDevicesEarlierWritesReachADeviceThatJoinsLater() async throws {
        let home = try TemporaryNode(name: "home")
        let secret = try await Self.founding(home.node)
        let machineID = "0123456789abcdef0123456789abcdef"
        let laptop = try TemporaryNode(name: "laptop", machineID: machineID)
        try laptop.node.joinGroup(code: secret.joinCode)
        try await Self.meet(laptop.node, home.node)
        _ = try await laptop.node.append(to: "notes", payload: "\"before the reinstall\"")
        try await Self.syncSigned(home.node, to: laptop.node)
        try await Self.syncSigned(laptop.node, to: home.node)

        let reinstalled = try TemporaryNode(name: "laptop", machineID: machineID)
        #expect(reinstalled.node.deviceID == laptop.node.deviceID)
        #expect(reinstalled.node.identity.signingKey.publicKey != laptop.node.identity.signingKey.publicKey)
        try reinstalled.node.joinGroup(code: secret.joinCode)
        try await home.node.vouch(for: reinstalled.node.deviceID, name: "laptop")
        try await Self.meet(reinstalled.node, home.node)
        try await Self.syncSigned(home.node, to: reinstalled.node)
        _ = try await reinstalled.node.append(to: "notes", payload: "\"after the reinstall\"")
        try await Self.syncSigned(reinstalled.node, to: home.node)
        #expect(try home.node.status().entries == 2)

        let late = try TemporaryNode(name: "therapy-room")
        try late.node.joinGroup(code: secret.joinCode)
        try await Self.meet(late.node, home.node)
        try await Self.syncSigned(home.node, to: late.node)
        try await Self.syncSigned(late.node, to: home.node)
        #expect(try late.node.status().entries == 2)
        #expect(try late.node.status().digest == home.node.status().digest)
        let member = try #require(try home.node.member(laptop.node.deviceID))
        #expect(member.signingKeysBefore == [laptop.node.identity.signingKey.publicKey.hexString])
    }

    /// A device catching up finds the key of one member pinned only by another member's
    /// observation, itself pinned by a third's, all in one delta: home saw the laptop, the laptop
    /// saw the tablet, and a late device has met only home. One merge takes the whole chain,
    /// each range once the ranges before it pinned its key; it used to take home's range alone
    /// and leave the others for the peer to send again, once per link, whole histories each time
    /// (Byzantine seed 237581: a reinstalled device asked for one replica from the start nine times).
    @Test func aCatchUpTakesRangesWhoseKeysTheSameDeltaPins() async throws {
        let home = try TemporaryNode(name: "home")
        let secret = try await Self.founding(home.node)
        let laptop = try TemporaryNode(name: "laptop")
        let tablet = try TemporaryNode(name: "tablet")
        for device in [laptop, tablet] { try device.node.joinGroup(code: secret.joinCode) }
        try await Self.meet(laptop.node, home.node)
        try await Self.meet(tablet.node, laptop.node)
        for index in 0..<3 { _ = try await tablet.node.append(to: "strokes", payload: "\(index)") }
        try await Self.syncSigned(home.node, to: laptop.node)
        try await Self.syncSigned(tablet.node, to: laptop.node)
        try await Self.syncSigned(laptop.node, to: home.node)
        #expect(try home.node.status().entries == 3)

        let late = try TemporaryNode(name: "therapy-room")
        let delta = try await Self.catchUp(late.node, joining: secret, from: home.node)
        #expect(
            Set(delta.coverage.map(\.replica)).isSuperset(of: [laptop.node.store.replica, tablet.node.store.replica])
        )
        let outcome = try await late.node.mergeSigned(
            try late.node.store.check(delta, signed: true),
            maxSkewMilliseconds: 60_000
        )
        #expect(outcome.notTaken.isEmpty)
        #expect(try late.node.status().entries == 3)
        try await late.node.store.extendOwnChain()
        try await Self.syncSigned(late.node, to: home.node)
        #expect(try late.node.status().digest == home.node.status().digest)
    }

    /// A range taken in a later round of one merge that fails its check refuses the rest of the
    /// delta, but the rounds before it are committed: what they merged reaches the app's
    /// observers all the same.
    @Test func aLaterRoundThatFailsStillPublishesWhatTheRoundsBeforeItMerged() async throws {
        let home = try TemporaryNode(name: "home")
        let secret = try await Self.founding(home.node)
        let laptop = try TemporaryNode(name: "laptop")
        try laptop.node.joinGroup(code: secret.joinCode)
        try await Self.meet(laptop.node, home.node)
        _ = try await laptop.node.append(to: "notes", payload: "\"the laptop's\"")
        _ = try await home.node.append(to: "notes", payload: "\"home's\"")
        try await Self.syncSigned(laptop.node, to: home.node)

        let late = try TemporaryNode(name: "therapy-room")
        var delta = try await Self.catchUp(late.node, joining: secret, from: home.node)
        // The laptop's entry, altered on the way: its range, taken in the second round, fails.
        let index = try #require(delta.entries.firstIndex { $0.dot.replica == laptop.node.store.replica })
        let altered = delta.entries[index]
        delta.entries[index] = Entry(
            id: altered.id,
            stream: altered.stream,
            originDevice: altered.originDevice,
            dot: altered.dot,
            hlc: altered.hlc,
            wallMilliseconds: altered.wallMilliseconds,
            payload: "\"altered\""
        )
        var changes = late.node.changes().makeAsyncIterator()
        await #expect(throws: LANSyncError.self) {
            try await late.node.mergeSigned(try late.node.store.check(delta, signed: true), maxSkewMilliseconds: 60_000)
        }
        #expect(try late.node.status().entries == 1, "home's range, taken in the first round, is committed")
        // A local write after it: the feed's next change, were the merge's not published.
        _ = try await late.node.append(to: "notes", payload: "\"the room's\"")
        guard case .entries(let merged, local: false)? = await changes.next() else {
            Issue.record("the first round's entries were not published")
            return
        }
        #expect(merged.map(\.payload) == ["\"home's\""])
    }

    /// The simulator's seed 502367: the voucher's clock runs ahead of the member that next sees
    /// the reinstalled device, so that member's observation carries a wall-clock time before the
    /// vouch's `added_at` although it merged the vouch first. The key pinned is the first one
    /// seen after the vouch in HLC order, so the reinstalled device's new writes verify.
    @Test func aVouchPinsTheKeySeenAfterItWhateverTheClocksSay() async throws {
        // One clock for every node, a millisecond further at each reading, whatever the machine's
        // speed: the home's clock must stay behind the voucher's however long the test takes (on
        // the machine's own clock, a run that took 175 s beside a busy machine put the home's
        // observation 40 s of offsets later than the vouch after all).
        let ticks = Ticks()
        let start = Int64(Timestamps.nowMilliseconds())
        func clock(_ offset: Int64) -> NodeClock { NodeClock { UInt64(start + offset) + ticks.next() } }
        let home = try TemporaryNode(name: "home", clock: clock(-20_000))
        let secret = try await Self.founding(home.node)
        let machineID = "00112233445566778899aabbccddeeff"
        let laptop = try TemporaryNode(name: "laptop", clock: clock(0), machineID: machineID)
        let tablet = try TemporaryNode(name: "tablet", clock: clock(20_000))
        for node in [laptop.node, tablet.node] {
            try node.joinGroup(code: secret.joinCode)
            try await Self.meet(node, home.node)
            try await Self.syncSigned(home.node, to: node)
            try await Self.syncSigned(node, to: home.node)
        }

        let reinstalled = try TemporaryNode(name: "laptop", clock: clock(0), machineID: machineID)
        try reinstalled.node.joinGroup(code: secret.joinCode)
        try await tablet.node.vouch(for: reinstalled.node.deviceID, name: "laptop")
        try await Self.syncSigned(tablet.node, to: home.node)
        let vouch = try #require(
            try home.node.records().first { $0.key == MemberKeys.member(reinstalled.node.deviceID.description) }
        )
        try await Self.meet(reinstalled.node, home.node)
        let observation = try #require(
            try home.node.records().first {
                $0.key == MemberKeys.seen(reinstalled.node.deviceID.description, by: home.node.deviceID.description)
            }
        )
        #expect(observation.wallMilliseconds < vouch.wallMilliseconds, "the home's clock runs behind the voucher's")
        #expect(observation.hlc > vouch.hlc, "but it merged the vouch before it saw the new key")

        #expect(try home.node.member(reinstalled.node.deviceID)?.key == reinstalled.node.identity.publicKeyHex)
        try await Self.syncSigned(home.node, to: reinstalled.node)
        _ = try await reinstalled.node.append(to: "notes", payload: "\"after the reinstall\"")
        try await Self.syncSigned(reinstalled.node, to: home.node)
        #expect(try home.node.status().entries == 1, "the reinstalled device's write verifies on the home machine")
    }

    /// A member that never heard of a device's earlier key vouches for it after a reinstall: its
    /// member record carries no history, and it replaces the record everyone held. The earlier
    /// key survives in the other members' grow-only key records (`lansync/keys/...`), so a device
    /// that joins later still verifies what the device wrote under it.
    @Test func anUninformedVouchLosesNoKeyHistory() async throws {
        let home = try TemporaryNode(name: "home")
        let secret = try await Self.founding(home.node)
        let machineID = "fedcba9876543210fedcba9876543210"
        let laptop = try TemporaryNode(name: "laptop", machineID: machineID)
        let tablet = try TemporaryNode(name: "tablet")
        for node in [laptop.node, tablet.node] { try node.joinGroup(code: secret.joinCode) }
        try await Self.meet(laptop.node, home.node)
        _ = try await laptop.node.append(to: "notes", payload: "\"before the reinstall\"")
        try await Self.syncSigned(laptop.node, to: home.node)
        let oldKey = laptop.node.identity.signingKey.publicKey.hexString
        #expect(
            try home.node.records().contains {
                $0.key
                    == MemberKeys.pinnedKey(
                        laptop.node.deviceID.description,
                        oldKey,
                        by: home.node.deviceID.description
                    )
            }
        )

        // The tablet, which never met the laptop, vouches for its new install.
        let reinstalled = try TemporaryNode(name: "laptop", machineID: machineID)
        try reinstalled.node.joinGroup(code: secret.joinCode)
        try await Self.meet(tablet.node, home.node)
        try await tablet.node.vouch(for: reinstalled.node.deviceID, name: "laptop")
        #expect(
            try tablet.node.member(reinstalled.node.deviceID)?.signingKeysBefore == nil,
            "the tablet knew no earlier key"
        )
        try await Self.meet(reinstalled.node, tablet.node)
        _ = try await reinstalled.node.append(to: "notes", payload: "\"after the reinstall\"")
        try await Self.syncSigned(reinstalled.node, to: tablet.node)
        try await Self.syncSigned(tablet.node, to: home.node)
        #expect(try home.node.member(reinstalled.node.deviceID)?.signingKeysEver.contains(oldKey) == true)

        let late = try TemporaryNode(name: "therapy-room")
        try late.node.joinGroup(code: secret.joinCode)
        try await Self.meet(late.node, home.node)
        try await Self.syncSigned(home.node, to: late.node)
        #expect(try late.node.status().entries == 2, "both installs' entries verify on a device that joined later")
    }

    /// A hand-over brings epoch records and the records of devices the receiver does not know;
    /// a member record that would re-pin a known device's key, a replica record and a write in
    /// the receiver's own replica are not taken from it.
    @Test func aHandOverTakesOnlyWhatAMemberThatWasAwayNeeds() async throws {
        let nodes = try await Self.group()
        let (home, laptop) = (nodes[0].node, nodes[1].node)
        let stranger = DeviceID(bytes: [UInt8](repeating: 0x5A, count: 16))!
        var counter: UInt64 = 100
        func write(_ key: String, _ value: String, in replica: ReplicaID) -> PreferenceWrite {
            counter += 1
            return PreferenceWrite(
                key: key,
                value: value,
                originDevice: home.deviceID,
                dot: Dot(replica: replica, counter: counter),
                hlc: HybridTimestamp(physicalMilliseconds: home.clock.now(), logical: 0),
                wallMilliseconds: 1
            )
        }
        let pinned = try #require(try laptop.member(home.deviceID)?.key)
        let hijack = GroupMember(
            deviceID: home.deviceID.description,
            name: "home",
            key: String(repeating: "ab", count: 32),
            addedBy: nil,
            addedAt: nil,
            via: "short code"
        )
        let newcomer = GroupMember(
            deviceID: stranger.description,
            name: "tablet",
            key: String(repeating: "cd", count: 32),
            addedBy: nil,
            addedAt: nil,
            via: "short code"
        )
        let records = [
            write(
                MemberKeys.member(home.deviceID.description),
                String(decoding: try JSONEncoder().encode(hijack), as: UTF8.self),
                in: home.replicaID
            ),
            write(
                MemberKeys.member(stranger.description),
                String(decoding: try JSONEncoder().encode(newcomer), as: UTF8.self),
                in: home.replicaID
            ),
            write(
                MemberKeys.seen(laptop.deviceID.description, by: home.deviceID.description),
                "{}",
                in: laptop.replicaID
            ),
        ]
        #expect(try await laptop.mergeHandedRecords(records) == 1)
        #expect(try laptop.member(home.deviceID)?.key == pinned, "a known device's key is not re-pinned")
        #expect(try laptop.member(stranger)?.name == "tablet", "a device it did not know is taken")
        #expect(
            try laptop.preference(MemberKeys.seen(laptop.deviceID.description, by: home.deviceID.description)) == nil,
            "nothing is written in its own replica's name"
        )
    }

    @Test func sealedBoxesOpenOnlyWithTheirKey() throws {
        let alice = KeyPair.generate()
        let mallory = KeyPair.generate()
        let secret = SecureBytes(randomCount: 32)
        let box = try SealedBox.seal(secret, to: alice.publicKey)
        #expect(box.count == 32 + SealedBox.overhead)
        #expect(SealedBox.open(box, with: alice)?.constantTimeEquals(secret) == true)
        #expect(SealedBox.open(box, with: mallory) == nil)
        var altered = box
        altered[40] ^= 1
        #expect(SealedBox.open(altered, with: alice) == nil)
    }

    @Test func signingKeysComeFromTheDeviceKeyAndSignaturesBindTheirMessage() throws {
        let device = KeyPair.generate()
        let signing = SigningKey(derivedFrom: device)
        #expect(
            SigningKey(derivedFrom: device).publicKey == signing.publicKey,
            "the same device key, the same signing key"
        )
        #expect(SigningKey(derivedFrom: KeyPair.generate()).publicKey != signing.publicKey)
        let message = Array("lansync epoch record v1".utf8)
        let signature = signing.sign(message)
        #expect(SigningKey.verify(signature, of: message, by: signing.publicKey))
        #expect(!SigningKey.verify(signature, of: message + [0], by: signing.publicKey))
        var altered = signature
        altered[0] ^= 1
        #expect(!SigningKey.verify(altered, of: message, by: signing.publicKey))
        #expect(!SigningKey.verify(signature, of: message, by: SigningKey(derivedFrom: KeyPair.generate()).publicKey))
    }

    /// Only an epoch record signed by the member it names as remover counts: one a member writes
    /// in another's name, or alters, removes nobody and moves nobody.
    @Test func aForgedOrAlteredEpochRecordRemovesNobody() async throws {
        let nodes = try await Self.group()
        let (home, laptop, tablet) = (nodes[0].node, nodes[1].node, nodes[2].node)
        let removal = try await home.removeMember(tablet.deviceID)
        let genuine = try #require(try home.epochRecords().last)
        #expect(genuine.isSigned(by: home.identity.signingKey.publicKey.hexString))

        // The tablet (removed, but still holding the old secret and its records) forges the next
        // epoch in home's name, removing the laptop, and an altered copy of the genuine one.
        try await tablet.merge(try Self.everything(home), maxSkewMilliseconds: 60_000)
        var forged = genuine
        forged.epoch = removal.epoch + 1
        forged.removed = [laptop.deviceID.description]
        forged.signature = Data(tablet.identity.signingKey.sign(forged.signedText)).base64EncodedString()
        var altered = genuine
        altered.epoch = removal.epoch + 2
        altered.removed = [laptop.deviceID.description]
        for record in [forged, altered] {
            _ = try await tablet.store.setPreferences(
                [
                    PreferenceRequest(
                        key: "lansync/epoch/\(record.epoch)",
                        value: String(decoding: try JSONEncoder().encode(record), as: UTF8.self)
                    )
                ],
                now: tablet.clock.now()
            )
        }
        // The laptop merges all of it: the genuine removal counts, the forgeries do not.
        try await laptop.merge(try Self.everything(tablet), maxSkewMilliseconds: 60_000)
        #expect(try laptop.member(tablet.deviceID)?.isRemoved == true)
        #expect(try laptop.member(laptop.deviceID)?.isRemoved == false)
        #expect(
            try laptop.adoptNewerEpoch(keyPair: laptop.identity.keyPair) == removal.epoch,
            "the genuine epoch, not a forged later one"
        )
        #expect(try laptop.groupEpochs()?.current.tag == home.groupEpochs()?.current.tag)
    }

    @Test func aVersion1GroupFileIsEpochZeroAndEpochsRoundTrip() throws {
        let path = NSTemporaryDirectory() + "group-\(UUID().uuidString).json"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let first = GroupSecret.generate()
        let hex = first.secret.withUnsafeBytes { [UInt8]($0).hexString }
        try Data(#"{"format":"lansync-group","version":1,"secret":"\#(hex)","joined":"2026-01-01T00:00:00.000Z"}"#.utf8)
            .write(to: URL(fileURLWithPath: path))
        let file = GroupFile(path: path)
        let loaded = try #require(try file.loadEpochs())
        #expect(loaded.epoch == 0 && loaded.previous.isEmpty && loaded.current.tag == first.tag)
        var epochs = loaded
        for epoch in 1...6 { epochs = epochs.advanced(to: UInt64(epoch), secret: .generate()) }
        try file.save(epochs, joined: "2026-01-01T00:00:00.000Z")
        let again = try #require(try file.loadEpochs())
        #expect(again.epoch == 6)
        #expect(
            again.previous.map(\.epoch) == [5, 4, 3, 2],
            "the last \(GroupEpochs.keptEpochs) earlier epochs are kept"
        )
        #expect(again.all.map(\.group.tag) == epochs.all.map(\.group.tag))
        #expect(file.joined() == "2026-01-01T00:00:00.000Z")
    }

    @Test func appsCannotWriteTheRecords() async throws {
        let node = try TemporaryNode().node
        await #expect(throws: LANSyncError.self) { try await node.set("lansync/member/x", to: "{}") }
        await #expect(throws: LANSyncError.self) { try await node.unset("lansync/epoch/1") }
        #expect(try node.status().preferences == 0)
    }

    /// A removal: the records say who and when, the new secret is sealed to every member that
    /// stays, and each of them (not the removed device) moves to the new epoch once it merges the
    /// records; a member that joined with the new epoch's code learns its number from them.
    @Test func aRemovalMovesEveryoneButTheRemovedDevice() async throws {
        let nodes = try await Self.group()
        let (home, laptop, tablet) = (nodes[0].node, nodes[1].node, nodes[2].node)
        #expect(try home.members().count == 3)
        let removal = try await home.removeMember(tablet.deviceID)
        #expect(removal.epoch == 1)
        #expect(Set(removal.sealedFor.map(\.deviceID)) == [home.deviceID.description, laptop.deviceID.description])
        #expect(removal.withoutKey.isEmpty)
        let record = try #require(try home.member(tablet.deviceID))
        #expect(record.isRemoved && record.removedBy == home.deviceID.description && record.removedInEpoch == 1)
        let homeEpochs = try #require(try home.groupEpochs())
        #expect(homeEpochs.epoch == 1 && homeEpochs.previous.map(\.epoch) == [0])

        // The records reach the other two (a hand-over, or a delta); only the laptop can open its copy.
        for node in [laptop, tablet] { try await node.merge(try Self.everything(home), maxSkewMilliseconds: 60_000) }
        #expect(try laptop.adoptNewerEpoch(keyPair: laptop.identity.keyPair) == 1)
        #expect(try laptop.groupEpochs()?.current.tag == homeEpochs.current.tag)
        #expect(try tablet.adoptNewerEpoch(keyPair: tablet.identity.keyPair) == nil)
        #expect(try tablet.groupEpochs()?.epoch == 0)
        #expect(try laptop.adoptNewerEpoch(keyPair: laptop.identity.keyPair) == nil, "nothing newer the second time")

        // A second removal numbers the next epoch after the records, and cannot repeat the first.
        await #expect(throws: LANSyncError.self) { _ = try await laptop.removeMember(tablet.deviceID) }
        await #expect(throws: LANSyncError.self) { _ = try await laptop.removeMember(laptop.deviceID) }

        // A device that joins with the new epoch's join code learns which epoch it is in.
        let newcomer = try TemporaryNode(name: "new-tablet")
        try newcomer.node.joinGroup(code: homeEpochs.current.joinCode)
        #expect(try newcomer.node.groupEpochs()?.epoch == 0)
        try await newcomer.node.merge(try Self.everything(home), maxSkewMilliseconds: 60_000)
        #expect(try newcomer.node.adoptNewerEpoch(keyPair: newcomer.node.identity.keyPair) == 1)
        #expect(try newcomer.node.groupEpochs()?.current.tag == homeEpochs.current.tag)
    }

    @Test func aMemberWithoutAPinnedKeyIsNamed() async throws {
        let nodes = try await Self.group()
        let home = nodes[0].node
        var laptop = try #require(try home.member(nodes[1].node.deviceID))
        laptop.key = nil
        try await home.record(laptop)
        let removal = try await home.removeMember(nodes[2].node.deviceID)
        #expect(removal.withoutKey.map(\.deviceID) == [nodes[1].node.deviceID.description])
        #expect(try home.epochRecords().last?.sealed[nodes[1].node.deviceID.description] == nil)
    }
}

/// A test clock's progress: one millisecond per reading, shared by the nodes of a test.
final class Ticks: Sendable {
    private let count = Atomic<UInt64>(0)

    func next() -> UInt64 { count.add(1, ordering: .relaxed).newValue }
}
