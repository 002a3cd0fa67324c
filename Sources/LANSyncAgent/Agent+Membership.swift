import Foundation
import LANSync
import LANSyncCore
import LANSyncCrypto
import LANSyncIdentity
import LANSyncTransport
import LANSyncWire

/// Who may sync: every handshake proves the peer holds one of the group's epoch keys; the
/// group's member records (`GroupMember`, synced like preferences) then decide, as
/// `docs/protocol.md` §11 says. A removed device is refused whatever key it presents; a device
/// whose key differs from the one the group pinned must be vouched for again (`group invite`);
/// a member that was away during a removal, known by its pinned key, is handed the new epoch.
extension Agent {
    enum Admission: Equatable {
        case admit
        /// The peer used an earlier epoch's key and is a member we know by its key.
        case handOver
        case refuse(String)
    }

    /// Decides about a peer after its handshake, and records the keys it presented.
    func admission(_ peer: Hello, key: [UInt8], epoch: UInt64) async -> Admission {
        let keyHex = key.hexString
        let members: [GroupMember]
        do { members = try node.members() } catch {
            return .refuse("this node cannot read its member records: \(error)")
        }
        let member = members.first { $0.deviceID == peer.device.description }
        if let member, member.isRemoved {
            let remover = members.first { $0.deviceID == member.removedBy }?.name ?? member.removedBy ?? "a member"
            return .refuse(
                "device \(peer.device) (\(peer.name)) was removed from the group by \(remover) at \(member.removedAt ?? "?"); "
                    + "a member can add it again with `lansync group invite`"
            )
        }
        if epoch < groupState.epoch {
            // Away during a removal: only a member the group knows by its key gets the new secret.
            guard let member, member.key == keyHex else {
                return .refuse(
                    "the group moved to a new epoch (a device was removed) and \(peer.name) is not a member known by its key; "
                        + "a member can add it again with `lansync group invite`"
                )
            }
            return .handOver
        }
        if let pinned = member?.key ?? pinsBeingWritten[peer.device], pinned != keyHex {
            if peer.device == node.deviceID { return .refuse(Self.clonedMachineAdvice(peer.device.description)) }
            return .refuse(
                "device \(peer.device) (\(peer.name)) presented a new device key (reinstalled, or cloned from another "
                    + "machine); a member must vouch for it: run `lansync group invite` on a member, then "
                    + "`lansync group join CODE` with that short code on \(peer.name)"
            )
        }
        // Its pinned key; or a device vouched for whose key nobody saw yet, or one the group has
        // no record of, in through the group's secret: the key it presented is pinned from now on.
        observe(peer, key: keyHex)
        return .admit
    }

    /// Records the key a peer presented, off the connection's path (a durable write must not
    /// delay the session's start); until the record is written, `pinsBeingWritten` holds it.
    private func observe(_ peer: Hello, key: String) {
        let node = node
        pinsBeingWritten[peer.device] = key
        Task {
            _ = try? await node.observe(peer.device, name: peer.name, key: key, signingKey: peer.signingKey?.hexString)
            pinWritten(peer.device, key: key)
        }
    }

    private func pinWritten(_ device: DeviceID, key: String) {
        if pinsBeingWritten[device] == key { pinsBeingWritten[device] = nil }
    }

    /// Records this device's own key as it sees it, so `group members` lists it from the start
    /// (it pins nothing the group does not already know: a key seen earlier by others comes
    /// first), and that it is back when it had left the group before.
    func recordSelf() async {
        try? await node.observeSelf()
        try? await node.announceReturnIfLeft()
    }

    /// Hands a member that was away during a removal the group's member and epoch records (a
    /// `records` message: merged without coverage, they are not a signed range), so it can open
    /// its sealed copy of the new secret and reconnect; the records then reach it again in their
    /// writers' signed ranges.
    func handOver(to peer: Hello, sender: SealedSender) async throws {
        var records = (try? node.records()) ?? []
        while !records.isEmpty {
            let count = max(1, WelcomeRecords.encode(records, within: WireProtocol.maxMessageBytes - 1).count)
            try await sender.send(.records(Array(records.prefix(count))))
            records.removeFirst(min(count, records.count))
        }
        try? await sender.send(
            .goodbye(
                code: .notAMember,
                reason:
                    "the group moved to epoch \(groupState.epoch) after a removal; this node handed you its records: reconnect with the new key"
            )
        )
        logger.notice(
            "handed a member that was away the group's new epoch",
            metadata: [
                "peer.device": "\(peer.device)", "peer.name": "\(peer.name)", "group.epoch": "\(groupState.epoch)",
            ]
        )
    }

    /// Reads the group file again (after `lansync group remove` here, or a hand-over merged from
    /// a member) and, when the epoch moved, advertises its tag and reconnects every peer with its key.
    func reloadGroup() async {
        // Records merged from a member may seal a newer epoch to this device.
        if let moved = try? node.adoptNewerEpoch(keyPair: node.identity.keyPair) {
            logger.notice(
                "the group's records moved this device to a newer epoch",
                metadata: ["group.epoch": "\(moved)"]
            )
        }
        guard let epochs = try? node.groupEpochs(), groupState.replace(with: epochs) else { return }
        logger.notice("now in group epoch \(epochs.epoch)", metadata: ["group.tag": "\(epochs.current.tag)"])
        await advertiseCurrentEpoch()
        // Sessions of the earlier epoch end: peers that hold the new key reconnect with it, a
        // removed device does not get back in.
        for registered in sessions.all { registered.close() }
        wakeDialers()
    }

    /// Whether merged or written preferences touch the records of an epoch.
    nonisolated static func touchEpochs(_ writes: [PreferenceWrite]) -> Bool {
        writes.contains { $0.key.hasPrefix(MemberKeys.epochPrefix) }
    }
}
