import LANSyncCrypto

/// The tags a node's mDNS TXT record lists (protocol §1): the tag of each of its groups for the
/// period, with decoys up to a multiple of `bucket`, in ascending order. Whoever browses, a
/// member of one of the groups included, learns from the list only that the node serves at most
/// `bucket` groups (or twice that, …), never whether it serves others beside the member's.
///
/// A decoy is the first 8 bytes of an HMAC keyed by the node's own secret over the period and the
/// decoy's number: it reads like any group's tag, matches no group, and changes with the period
/// as the tags do, so decoys cannot be told from tags nor followed from one day to the next.
struct AdvertisedTags: Sendable {
    /// Tags are listed in steps of this many.
    static let bucket = 8
    /// Tags in one TXT string: `g=` and 14 tags of 16 hex digits with their commas make 240 bytes,
    /// within the 255 a TXT string holds. Longer lists go on in `g2`, `g3`, ….
    static let perString = 14
    /// The most tags a record may list (a node in up to 1,024 groups); a longer one is ignored.
    static let mostTags = 1_024

    private let decoyKey: [UInt8]

    /// Decoys keyed by the node's static secret key (HMAC-SHA256 over `lansync/v2/mdns-decoys`):
    /// no file of their own, the same after a restart.
    init(staticSecret: some ContiguousBytes) {
        decoyKey = SHA256.hmac(key: staticSecret, message: Array("lansync/v2/mdns-decoys".utf8))
    }

    /// The tags to advertise in `period`: `groupTags` (each group's tag for the period) and
    /// decoys, `bucket` at least, sorted.
    func tags(groupTags: [String], period: Int64) -> [String] {
        var all = Set(groupTags)
        let count = max(Self.bucket, (all.count + Self.bucket - 1) / Self.bucket * Self.bucket)
        var number = 0
        while all.count < count {
            all.insert(decoy(period: period, number: number))
            number += 1
        }
        return all.sorted()
    }

    /// Decoy `number` of `period`: 16 lowercase hex digits, as a tag.
    func decoy(period: Int64, number: Int) -> String {
        let mac = SHA256.hmac(key: decoyKey, message: Array("lansync/v2/mdns-decoy/\(period)/\(number)".utf8))
        return Array(mac.prefix(8)).hexString
    }

    /// The TXT keys holding `tags`: `g` with the first `perString`, then `g2`, `g3`, … .
    static func txtValues(_ tags: [String]) -> [String: String] {
        var values: [String: String] = [:]
        for (index, first) in stride(from: 0, to: tags.count, by: perString).enumerated() {
            let key = index == 0 ? "g" : "g\(index + 1)"
            values[key] = tags[first..<min(first + perString, tags.count)].joined(separator: ",")
        }
        return values
    }

    /// The tags a TXT record lists (`g`, then `g2`, `g3`, … while present), or nil when it lists
    /// none or one of them is not 16 lowercase hex digits (the record is then ignored). A record
    /// of an earlier release, with one tag in `g`, reads as a list of one.
    static func parse(_ txt: [String: String]) -> [String]? {
        guard let first = txt["g"] else { return nil }
        var tags = [String]()
        var value: String? = first
        var key = 1
        while let string = value {
            for tag in string.split(separator: ",", omittingEmptySubsequences: false) {
                guard tag.utf8.count == 16, tag.utf8.allSatisfy(isLowercaseHex) else { return nil }
                tags.append(String(tag))
            }
            guard tags.count <= mostTags else { return nil }
            key += 1
            value = txt["g\(key)"]
        }
        return tags
    }

    private static func isLowercaseHex(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
    }
}
