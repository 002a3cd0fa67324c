import Foundation
import LANSyncAgent
import Synchronization

/// The configuration file this run uses, loaded once by `main` before any command runs.
enum LoadedConfig {
    private static let loaded = Mutex<(file: ConfigFile, path: String?)>((ConfigFile(), nil))

    static var file: ConfigFile { loaded.withLock { $0.file } }
    static var path: String? { loaded.withLock { $0.path } }

    /// Where the file is looked for without `--config`: $LANSYNC_CONFIG, then
    /// $XDG_CONFIG_HOME/lansync/lansync.conf (or ~/.config/…), then /etc/lansync/lansync.conf.
    static func defaultPaths(_ environment: [String: String]) -> [String] {
        var paths = [String]()
        if let explicit = environment["LANSYNC_CONFIG"], !explicit.isEmpty { return [explicit] }
        if let xdg = environment["XDG_CONFIG_HOME"], xdg.hasPrefix("/") {
            paths.append(xdg + "/lansync/lansync.conf")
        } else if let home = environment["HOME"], !home.isEmpty {
            paths.append(home + "/.config/lansync/lansync.conf")
        }
        paths.append("/etc/lansync/lansync.conf")
        return paths
    }

    /// Takes `--config FILE` (or `--config=FILE`) out of the arguments, wherever it stands before
    /// a `--`, then loads that file or the first default one that exists. Any problem is an error.
    static func load(arguments: [String], environment: [String: String]) throws(ConfigLoadError) -> [String] {
        var rest = [String]()
        var explicit: String?
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            if argument == "--" {
                rest += arguments[index...]
                break
            }
            if argument == "--config" {
                guard index + 1 < arguments.count else { throw ConfigLoadError("--config needs a file name") }
                explicit = arguments[index + 1]
                index += 2
                continue
            }
            if argument.hasPrefix("--config=") {
                explicit = String(argument.dropFirst("--config=".count))
                index += 1
                continue
            }
            rest.append(argument)
            index += 1
        }
        let path: String?
        if let explicit {
            guard FileManager.default.fileExists(atPath: explicit) else {
                throw ConfigLoadError("the config file \(explicit) does not exist")
            }
            path = explicit
        } else {
            let candidates = defaultPaths(environment)
            path = candidates.first { FileManager.default.fileExists(atPath: $0) }
            if environment["LANSYNC_CONFIG"] != nil, path == nil {
                throw ConfigLoadError("LANSYNC_CONFIG names \(candidates[0]), which does not exist")
            }
        }
        guard let path else { return rest }
        guard let data = Self.contents(of: path) else {
            // A default file found a moment ago and gone now (a package being removed) is no file.
            if explicit == nil, environment["LANSYNC_CONFIG"] == nil, !FileManager.default.fileExists(atPath: path) {
                return rest
            }
            throw ConfigLoadError("cannot read the config file \(path) (check its permissions)")
        }
        do {
            let file = try ConfigFile.parse(String(decoding: data, as: UTF8.self), path: path)
            loaded.withLock { $0 = (file, path) }
        } catch {
            throw ConfigLoadError("\(error); fix the file (`lansync help config` describes it), nothing was run")
        }
        return rest
    }

    /// A file's bytes, read to its end; nil when it cannot be opened or read. Unlike
    /// `FileManager.contents(atPath:)`, this reads `/dev/null` as the empty file it is, the usual
    /// way to say "no configuration" (`LANSYNC_CONFIG=/dev/null`).
    private static func contents(of path: String) -> Data? {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        do {
            // `readToEnd` says nil, not an error, for a file that is empty from the start.
            return try handle.readToEnd() ?? Data()
        } catch {
            return nil
        }
    }
}

struct ConfigLoadError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
