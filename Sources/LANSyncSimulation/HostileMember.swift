import Foundation
import LANSync
import LANSyncCore
import LANSyncStore

/// What the hostile member of a Byzantine run does to a batch it sends: nothing, most of the
/// time; else one of the attacks an independent implementation found against §12.
enum HostileAction {
    /// The batch is not sent (the peer gets those changes elsewhere, or later).
    case withhold
    /// Another batch goes in its place.
    case replace(Delta)
    /// A hostile delta goes before the batch.
    case prepend(Delta)
    /// Records go before the batch, outside any hand-over (the receiver must end the session).
    case records([PreferenceWrite])
}

extension GroupSimulation {
    /// A range of `replica` in the hostile member's name: a node of its device (its identity, so
    /// its pinned keys) whose replica ID is `replica`, with a record that names its device and
    /// copies the true owner's nonce when the hostile member holds the owner's record.
    func claim(_ replica: ReplicaID, as node: LANSyncNode) async throws -> Delta {
        let claimer: LANSyncNode
        if let made = claims[replica] {
            claimer = made
        } else {
            claimer = try LANSyncNode.create(
                at: DataDirectory(path: root + "/claim-\(replica)"),
                identity: node.identity,
                replica: .exactly(replica),
                clock: node.clock
            )
            claims[replica] = claimer
        }
        let owners = try node.preference(MemberKeys.replica(replica)).flatMap {
            try? JSONDecoder().decode(ReplicaRecord.self, from: Data($0.utf8))
        }
        var record = ReplicaRecord(replica: replica, device: node.deviceID, key: node.identity.signingKey, nonce: nil)
        record.nonce = owners?.nonce
        let json = String(decoding: try JSONEncoder().encode(record), as: UTF8.self)
        _ = try await claimer.store.setPreferences(
            [PreferenceRequest(key: MemberKeys.replica(replica), value: json)],
            now: node.clock.now()
        )
        _ = try await claimer.store.extendOwnChain()
        return try claimer.store.signedDelta(since: VersionVector(), maxRows: 200)
    }

    /// The hostile member's version of `delta`, or nil to send it as it is.
    func hostileCopy(of delta: Delta, node: LANSyncNode, peerKnown: VersionVector) async throws -> HostileAction? {
        guard network.chance(0.3) else { return nil }
        switch Int.random(in: 0..<5, using: &network) {
        case 4:
            // Another device's replica the peer has not heard of yet, claimed as the hostile
            // member's own: a record naming its device and key, and a change, signed with its key.
            let mine = node.replicaID
            guard
                let victim = try node.store.versionVector().counters.keys.sorted().first(where: {
                    $0 != mine && peerKnown[$0] == 0
                })
            else { return nil }
            if Self.tracing {
                print("t=\(now) n\(schedule.byzantine ?? -1) claims replica \(victim.description.prefix(12))")
            }
            return .prepend(try await claim(victim, as: node))
        case 3:
            // A member record that re-pins another member's key, sent as a hand-over would.
            guard
                let victim = try node.members().first(where: {
                    $0.deviceID != node.deviceID.description && !$0.isRemoved
                })
            else { return nil }
            var forged = victim
            forged.key = String(repeating: "ab", count: 32)
            let value = String(decoding: (try? JSONEncoder().encode(forged)) ?? Data(), as: UTF8.self)
            let counter = try node.store.versionVector()[node.replicaID] + 1
            return .records([
                PreferenceWrite(
                    key: MemberKeys.member(victim.deviceID),
                    value: value,
                    originDevice: node.deviceID,
                    dot: Dot(replica: node.replicaID, counter: counter),
                    hlc: HybridTimestamp(physicalMilliseconds: node.clock.now(), logical: 0),
                    wallMilliseconds: Int64(node.clock.now())
                )
            ])
        case 0:
            return .withhold
        case 1:
            // A live preference write of another replica passed off as lost: its leaf, and so the
            // range's signature, still hold.
            var altered = delta
            guard
                let index = altered.preferences.firstIndex(where: {
                    $0.dot.replica != node.replicaID && $0.value != nil
                })
            else { return nil }
            let write = altered.preferences.remove(at: index)
            altered.preferenceStubs.append(PreferenceStub(write, hasher: ReplicaStore.elementHasher))
            return .replace(altered)
        default:
            // A range the peer verified long ago, sent again with one change altered: a later
            // clock and another value for a preference (a record, perhaps).
            guard
                let replica = peerKnown.counters.keys.sorted().first(where: {
                    $0 != node.replicaID && peerKnown[$0] > 0
                })
            else { return nil }
            var replay = try node.store.signedDelta(
                since: VersionVector(),
                upTo: VersionVector([replica: peerKnown[replica]]),
                maxRows: 200
            )
            guard let index = replay.preferences.firstIndex(where: { $0.dot.replica == replica }) else { return nil }
            let write = replay.preferences[index]
            replay.preferences[index] = PreferenceWrite(
                key: write.key,
                value: "\"forged\"",
                originDevice: write.originDevice,
                dot: write.dot,
                hlc: HybridTimestamp(physicalMilliseconds: write.hlc.physicalMilliseconds + 1, logical: 0),
                wallMilliseconds: write.wallMilliseconds
            )
            return .prepend(replay)
        }
    }
}
