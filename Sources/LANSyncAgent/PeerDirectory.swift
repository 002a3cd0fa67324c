import Foundation
import LANSync
import LANSyncTransport

/// One known peer, as `lansync peers` shows it.
public struct PeerRecord: Codable, Sendable, Equatable {
    /// Where the connection to a peer stands.
    public enum State: String, Codable, Sendable {
        /// A session runs.
        case connected
        /// A connection is being made.
        case dialing
        /// The handshake was refused (another group, a clock too far off, a removed device):
        /// `lastError` says why.
        case refused
        /// The address did not answer.
        case unreachable
        /// It was connected, and is not now.
        case disconnected
    }

    /// Device ID, or nil for an address that never completed a handshake.
    public var deviceID: String?
    /// The peer's device name, from its handshake.
    public var name: String?
    /// Where it was last reached (`host:port`).
    public var address: String?
    /// Where the connection stands.
    public var state: State
    /// When it was last heard from, milliseconds since the Unix epoch.
    public var lastSeen: Int64?
    /// When changes last moved between us (merged from it or sent to it), milliseconds since the Unix epoch.
    public var lastSync: Int64?
    /// Operations the peer holds that we lack (from the version vectors).
    public var weLack: UInt64?
    /// Operations we hold that the peer lacks.
    public var theyLack: UInt64?
    /// The peer's clock minus ours, measured at the handshake.
    public var clockOffsetMilliseconds: Int64?
    /// Why the last connection failed or was refused, with what to do.
    public var lastError: String?
    /// Set when the peer's device key changed since we first saw it (reinstall or new key pair).
    public var rekeyed: Bool?
    /// The peer's device key, as hex, from its last handshake.
    public var publicKey: String?
    /// The peer's state digest as it last announced it.
    public var digest: String?
    /// Two machines present this device ID (a cloned machine-id): `lansync status` gives the fix.
    public var duplicateDevice: Bool?
    /// The peer's version vector as it last announced it (replica ID → counter): what it holds.
    public var versionVector: [String: UInt64]?

    enum CodingKeys: String, CodingKey {
        case deviceID = "device_id", name, address, state
        case lastSeen = "last_seen", lastSync = "last_sync", weLack = "we_lack", theyLack = "they_lack"
        case clockOffsetMilliseconds = "clock_offset_ms", lastError = "last_error", rekeyed
        case publicKey = "public_key", digest, duplicateDevice = "duplicate_device", versionVector = "version_vector"
    }
}

/// Everything the agent knows about peers; persisted to `peers.json` so `lansync peers` can
/// answer when the agent is not running, and so pinned keys survive restarts.
actor PeerDirectory {
    private var byDevice: [String: PeerRecord] = [:]
    /// Addresses dialed or refused before a handshake named a device.
    private var byAddress: [String: PeerRecord] = [:]
    private let path: String
    private var dirty = false
    /// The pending write of `peers.json`, and when it is due.
    private var writeDue: (task: Task<Void, Never>, at: ContinuousClock.Instant)?

    /// How soon `peers.json` is written after a change: soon after one that matters when the
    /// agent is not running (a connection, a key, an error), within ten minutes after one that
    /// only moves "last seen" times forward (each state a peer announces does). So an idle agent
    /// does not write and fsync a file every second, nor a node in 50 groups 50 files a minute;
    /// stopping writes whatever is pending, and a running agent answers `lansync peers` itself.
    static let writeAfterChange: Duration = .seconds(1)
    static let writeAfterTimes: Duration = .seconds(600)

    /// Marks the records changed and schedules their write.
    private func changed(onlyTimes: Bool = false) {
        dirty = true
        let at = ContinuousClock.now + (onlyTimes ? Self.writeAfterTimes : Self.writeAfterChange)
        if let due = writeDue, due.at <= at { return }
        writeDue?.task.cancel()
        let task = Task { [weak self] in
            try? await Task.sleep(until: at)
            guard !Task.isCancelled else { return }
            await self?.writeWhenDue()
        }
        writeDue = (task, at)
    }

    private func writeWhenDue() async {
        writeDue = nil
        await persist()
    }

    init(path: String) {
        self.path = path
        if let data = FileManager.default.contents(atPath: path),
            let records = try? JSONDecoder().decode([PeerRecord].self, from: data)
        {
            for var record in records {
                if record.state == .connected || record.state == .dialing { record.state = .disconnected }
                if let device = record.deviceID { byDevice[device] = record }
            }
        }
    }

    static func load(path: String) -> [PeerRecord] {
        guard let data = FileManager.default.contents(atPath: path) else { return [] }
        return (try? JSONDecoder().decode([PeerRecord].self, from: data)) ?? []
    }

    var all: [PeerRecord] {
        (Array(byDevice.values) + Array(byAddress.values)).sorted {
            ($0.name ?? $0.address ?? "", $0.deviceID ?? "") < ($1.name ?? $1.address ?? "", $1.deviceID ?? "")
        }
    }

    func address(_ address: String, state: PeerRecord.State, error: String? = nil) {
        // An address whose device is known updates that device's record.
        if let device = byDevice.first(where: { $0.value.address == address && $0.value.state != .connected })?.key {
            byDevice[device]?.state = state
            if let error { byDevice[device]?.lastError = error }
        } else if byDevice.contains(where: { $0.value.address == address && $0.value.state == .connected }) {
            return
        } else {
            var record = byAddress[address] ?? PeerRecord(address: address, state: state)
            record.state = state
            if let error { record.lastError = error }
            byAddress[address] = record
            trimRefused()
        }
        changed()
    }

    /// A handshake completed. Returns true when the device's key differs from the one pinned.
    func connected(
        device: String,
        name: String,
        address: String,
        publicKey: String,
        clockOffset: Int64,
        now: Int64
    )
        -> Bool
    {
        var record = byDevice[device] ?? PeerRecord(deviceID: device, state: .connected)
        let rekeyed = record.publicKey != nil && record.publicKey != publicKey
        if rekeyed { record.rekeyed = true }
        record.publicKey = publicKey
        record.name = name
        record.address = address
        record.state = .connected
        record.lastSeen = now
        record.clockOffsetMilliseconds = clockOffset
        record.lastError = nil
        byDevice[device] = record
        byAddress.removeValue(forKey: address)
        changed()
        return rekeyed
    }

    func update(device: String, _ change: @Sendable (inout PeerRecord) -> Void) {
        guard let before = byDevice[device] else { return }
        var record = before
        change(&record)
        guard record != before else { return }
        byDevice[device] = record
        var timesMoved = before
        timesMoved.lastSeen = record.lastSeen
        timesMoved.lastSync = record.lastSync
        changed(onlyTimes: timesMoved == record)
    }

    /// A connection ended; a peer refused before it was ever connected still gets a record, so
    /// `lansync peers` says why (a clock far off, say).
    func disconnected(device: String, name: String?, address: String, error: String?, refused: Bool) {
        var record =
            byDevice[device] ?? PeerRecord(deviceID: device, name: name, address: address, state: .disconnected)
        record.state = refused ? .refused : .disconnected
        record.lastError = error
        byDevice[device] = record
        byAddress.removeValue(forKey: address)
        changed()
    }

    /// Drops an address-only record (an address that turned out to be our own).
    func forget(address: String) {
        if byAddress.removeValue(forKey: address) != nil { changed() }
    }

    /// Keeps at most 20 address-only records, dropping the oldest refused strangers first.
    private func trimRefused() {
        while byAddress.count > 20, let oldest = byAddress.first(where: { $0.value.state == .refused })?.key {
            byAddress.removeValue(forKey: oldest)
        }
    }

    /// Writes `peers.json` when anything changed (atomically, owner-only). The write runs on a
    /// bulk-work thread: it ends with an fsync, which under a catch-up's disk traffic can take
    /// milliseconds, and on the cooperative pool it would hold a thread the app's tasks resume on.
    func persist() async {
        writeDue?.task.cancel()
        writeDue = nil
        guard dirty else { return }
        dirty = false
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        guard
            let data = try? encoder.encode(Array(byDevice.values).sorted { ($0.deviceID ?? "") < ($1.deviceID ?? "") })
        else { return }
        let (bytes, path) = ([UInt8](data), path)
        _ = try? await BulkWork.run { try SecretFile.write(bytes, to: path) }
    }
}
