//! Named formats of `fluxgate jobs -o NAME`: flux-jobs' built-in ones and
//! those a user registers in `flux-jobs.toml` (or `.json`) under the XDG
//! config directories, as flux-core's `UtilConfig` loads them. Fluxgate's own
//! `fluxgate/fluxgate-jobs.*` files are read after flux's in each directory.

use std::path::{Path, PathBuf};

use serde_json::Value as Json;

/// flux-jobs' built-in formats: name, description, format.
pub const BUILTIN: [(&str, &str, &str); 5] = [
    (
        "default",
        "Default flux-jobs format string",
        "{id.f58:>12} ?:{queue:<8.8} +:{username:<8} {name:<10.10+} \
         {status_abbrev:>2.2} {ntasks:>6} {nnodes:>6h} \
         {contextual_time!F:>8h} {contextual_info}",
    ),
    (
        "cute",
        "Cute flux-jobs format string (default with emojis)",
        "{id.f58:>12} ?:{queue:<8.8} +:{username:<8} {name:<10.10+} \
         {status_emoji:>5.5} {ntasks:>6} {nnodes:>6h} \
         {contextual_time!F:>8h} {contextual_info}",
    ),
    (
        "long",
        "Extended flux-jobs format string",
        "{id.f58:>12} ?:{queue:<8.8} +:{username:<8} {name:<10.10+} \
         {status:>9.9} {ntasks:>6} {nnodes:>6h} \
         {t_submit!d:%b%d %R::>12} {t_remaining!F:>12h} \
         {contextual_time!F:>8h} {contextual_info}",
    ),
    (
        "deps",
        "Show job urgency, priority, and dependencies",
        "{id.f58:>12} ?:{queue:<8.8} {name:<10.10+} {urgency:<3} \
         {priority:<12} {state:<8.8} {dependencies}",
    ),
    (
        "endreason",
        "Show why each job ended",
        "{id.f58:>12} ?:{queue:<8.8} +:{username:<8} {name:<10.10+} \
         {status_abbrev:>2.2} {t_inactive!d:%b%d %R::>12h} {inactive_reason}",
    ),
];

/// Environment variables that replace the `default` format, first wins.
pub const DEFAULT_ENV: [&str; 2] = ["FLUXGATE_JOBS_FORMAT_DEFAULT", "FLUX_JOBS_FORMAT_DEFAULT"];

/// One named format.
#[derive(Debug, Clone, PartialEq)]
pub struct Named {
    /// Its name (`-o NAME`).
    pub name: String,
    /// A short description for `-o help`.
    pub description: Option<String>,
    /// The format string.
    pub format: String,
}

/// The built-in formats followed by those of the config files.
#[derive(Debug, Clone)]
pub struct Formats {
    list: Vec<Named>,
}

/// What `-o` asked for once resolved.
#[derive(Debug, Clone, PartialEq)]
pub enum Choice {
    /// Render with this format string.
    Format(String),
    /// Print this text (for `help` and `get-config=`) and exit 0.
    Print(String),
}

/// The config directories in increasing precedence, as flux's
/// `xdg_searchpath()` reversed: `$XDG_CONFIG_DIRS` (last entry first, default
/// `/etc/xdg`) then `$XDG_CONFIG_HOME` (default `~/.config`).
pub fn search_dirs(
    xdg_home: Option<&str>,
    xdg_dirs: Option<&str>,
    home: Option<&Path>,
) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = xdg_dirs
        .filter(|s| !s.is_empty())
        .unwrap_or("/etc/xdg")
        .split(':')
        .map(PathBuf::from)
        .collect();
    dirs.reverse();
    let home_cfg = match xdg_home.filter(|s| !s.is_empty()) {
        Some(h) => PathBuf::from(h),
        None => home.map(|h| h.join(".config")).unwrap_or_default(),
    };
    dirs.push(home_cfg);
    dirs
}

impl Formats {
    /// Only the built-in formats.
    pub fn builtin() -> Formats {
        let list = BUILTIN
            .iter()
            .map(|(n, d, f)| Named {
                name: n.to_string(),
                description: Some(d.to_string()),
                format: f.to_string(),
            })
            .collect();
        Formats { list }
    }

    /// Built-ins plus every `flux-jobs.{json,toml}` in `dirs` (in order, later
    /// files override earlier ones).
    pub fn load(dirs: &[PathBuf]) -> Result<Formats, String> {
        let mut f = Formats::builtin();
        for d in dirs {
            for (sub, stem) in [("flux", "flux-jobs"), ("fluxgate", "fluxgate-jobs")] {
                // Lexical order, as flux's glob: .json before .toml.
                for ext in ["json", "toml"] {
                    let p = d.join(sub).join(format!("{stem}.{ext}"));
                    if p.is_file() {
                        f.load_file(&p)?;
                    }
                }
            }
        }
        Ok(f)
    }

    fn load_file(&mut self, path: &Path) -> Result<(), String> {
        let p = path.display();
        let text = std::fs::read_to_string(path).map_err(|e| format!("{p}: {e}"))?;
        let conf: Json = if path.extension().is_some_and(|e| e == "toml") {
            let t: toml::Value = toml::from_str(&text).map_err(|e| format!("{p}: {e}"))?;
            serde_json::to_value(t).map_err(|e| format!("{p}: {e}"))?
        } else {
            serde_json::from_str(&text).map_err(|e| format!("{p}: {e}"))?
        };
        let Json::Object(top) = conf else {
            return Err(format!("{p}: expected a table"));
        };
        for (key, value) in top {
            if key != "formats" {
                return Err(format!("{p}: invalid key {key}"));
            }
            let Json::Object(formats) = value else {
                return Err(format!("{p}: the 'formats' key must be a mapping"));
            };
            for (name, entry) in formats {
                self.add(&p.to_string(), name, entry)?;
            }
        }
        Ok(())
    }

    fn add(&mut self, p: &str, name: String, entry: Json) -> Result<(), String> {
        if BUILTIN.iter().any(|(n, _, _)| *n == name) {
            return Err(format!(
                "{p}: override of builtin format '{name}' not permitted"
            ));
        }
        let Json::Object(entry) = entry else {
            return Err(format!("{p}: 'formats.{name}' must be a mapping"));
        };
        let format = match entry.get("format") {
            None => {
                return Err(format!(
                    "{p}: formats.{name}: required key 'format' missing"
                ));
            }
            Some(Json::String(s)) => s.clone(),
            Some(_) => {
                return Err(format!(
                    "{p}: formats.{name}: 'format' key must be a string"
                ));
            }
        };
        let description = entry
            .get("description")
            .and_then(Json::as_str)
            .map(str::to_string);
        let named = Named {
            name: name.clone(),
            description,
            format,
        };
        match self.list.iter_mut().find(|n| n.name == name) {
            Some(slot) => *slot = named,
            None => self.list.push(named),
        }
        Ok(())
    }

    /// Resolve `-o ARG` as flux's `get_format_string`: a format string (it has
    /// a `{`), `help`, `get-config=NAME`, or a name; `env_default` replaces
    /// `default` when it holds a format string.
    pub fn choose(&self, arg: &str, env_default: Option<&str>) -> Result<Choice, String> {
        if arg.contains('{') {
            return Ok(Choice::Format(arg.to_string()));
        }
        if arg == "help" {
            let mut s = String::from("\nConfigured flux-jobs output formats:\n\n");
            for n in &self.list {
                s.push_str(&format!("  {:<12}", n.name));
                match &n.description {
                    Some(d) => s.push_str(&format!(" {d}\n")),
                    None => s.push('\n'),
                }
            }
            return Ok(Choice::Print(s));
        }
        if let Some(name) = arg.strip_prefix("get-config=") {
            let n = self
                .get(name)
                .ok_or_else(|| format!("--format: No such format {name}"))?;
            let mut s = format!("[formats.{name}]\n");
            if let Some(d) = &n.description {
                s.push_str(&format!("description = \"{d}\"\n"));
            }
            s.push_str(&format!("format = \"{}\"\n", n.format));
            return Ok(Choice::Print(s));
        }
        if arg == "default"
            && let Some(f) = env_default.filter(|f| f.contains('{'))
        {
            return Ok(Choice::Format(f.to_string()));
        }
        match self.get(arg) {
            Some(n) => Ok(Choice::Format(n.format.clone())),
            None => Err(format!(
                "--format: No such format {arg} (Did you mean '{}'?)",
                brace_words(arg)
            )),
        }
    }

    fn get(&self, name: &str) -> Option<&Named> {
        self.list.iter().find(|n| n.name == name)
    }
}

/// Python's `re.sub(r"\w+", r"{\g<0>}", s)`: the suggestion flux makes.
fn brace_words(s: &str) -> String {
    let mut out = String::new();
    let mut in_word = false;
    for c in s.chars() {
        let w = c.is_alphanumeric() || c == '_';
        if w && !in_word {
            out.push('{');
        } else if !w && in_word {
            out.push('}');
        }
        in_word = w;
        out.push(c);
    }
    if in_word {
        out.push('}');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chooses_like_flux() {
        let f = Formats::builtin();
        let fmt = |s: &str| Choice::Format(s.to_string());
        assert_eq!(f.choose("{id}", None), Ok(fmt("{id}")));
        assert_eq!(f.choose("deps", None), Ok(fmt(BUILTIN[3].2)));
        assert_eq!(f.choose("default", Some("{name}")), Ok(fmt("{name}")));
        assert_eq!(f.choose("default", Some("long")), Ok(fmt(BUILTIN[0].2)));
        assert_eq!(
            f.choose("id name", None),
            Err("--format: No such format id name (Did you mean '{id} {name}'?)".into())
        );
        assert_eq!(
            f.choose("get-config=nope", None),
            Err("--format: No such format nope".into())
        );
        let Ok(Choice::Print(help)) = f.choose("help", None) else {
            panic!("help");
        };
        assert!(
            help.contains("\n  endreason    Show why each job ended\n"),
            "{help}"
        );
        let Ok(Choice::Print(cfg)) = f.choose("get-config=deps", None) else {
            panic!("get-config");
        };
        assert!(
            cfg.starts_with("[formats.deps]\ndescription = \"Show job urgency"),
            "{cfg}"
        );
    }

    #[test]
    fn loads_user_formats_with_precedence() {
        let sys = tempfile::tempdir().expect("tmp");
        let home = tempfile::tempdir().expect("tmp");
        std::fs::create_dir_all(sys.path().join("flux")).expect("mkdir");
        std::fs::create_dir_all(home.path().join("flux")).expect("mkdir");
        std::fs::write(
            sys.path().join("flux/flux-jobs.toml"),
            "[formats.mine]\ndescription = \"sys\"\nformat = \"{id}\"\n[formats.other]\nformat = \"{name}\"\n",
        )
        .expect("write");
        std::fs::write(
            home.path().join("flux/flux-jobs.json"),
            r#"{"formats": {"mine": {"format": "{id.f58} {result}"}}}"#,
        )
        .expect("write");
        let dirs = search_dirs(
            Some(&home.path().display().to_string()),
            Some(&sys.path().display().to_string()),
            None,
        );
        let f = Formats::load(&dirs).expect("load");
        assert_eq!(
            f.choose("mine", None),
            Ok(Choice::Format("{id.f58} {result}".into()))
        );
        assert_eq!(f.choose("other", None), Ok(Choice::Format("{name}".into())));

        std::fs::write(
            home.path().join("flux/flux-jobs.toml"),
            "[formats.default]\nformat = \"{id}\"\n",
        )
        .expect("write");
        let err = Formats::load(&dirs).expect_err("override");
        assert!(
            err.ends_with("override of builtin format 'default' not permitted"),
            "{err}"
        );
    }

    #[test]
    fn search_order_is_system_then_user() {
        let d = search_dirs(None, Some("/a:/b"), Some(Path::new("/h")));
        assert_eq!(
            d,
            vec![
                PathBuf::from("/b"),
                PathBuf::from("/a"),
                PathBuf::from("/h/.config")
            ]
        );
    }
}
