//! The `whole-cluster` test group of .config/nextest.toml names tests by text: a module or test
//! renamed without it would quietly run in the shared lane, beside the tests it disturbs.
//! These checks read the filter and find every name it gives among the e2e tests' sources, and
//! every module that installs the chart with values of its own among the group's modules.

#[cfg(test)]
mod tests {
    use crate::cluster::repo_root;
    use std::fs;

    /// The whole-cluster override's filter: `test(/^(m1|m2)::/)` modules and `test(=m::t)` tests.
    fn whole_cluster_names() -> (Vec<String>, Vec<(String, String)>) {
        let config = fs::read_to_string(repo_root().join(".config/nextest.toml")).unwrap();
        let filter = config
            .split("[[profile.e2e.overrides]]")
            .find(|o| o.contains("test-group = \"whole-cluster\""))
            .expect("an e2e override puts tests in the whole-cluster group");
        let modules = filter
            .split("test(/^(")
            .skip(1)
            .flat_map(|t| t[..t.find(")::/)").unwrap()].split('|'))
            .map(str::to_string)
            .collect();
        let tests = filter
            .split("test(=")
            .skip(1)
            .map(|t| {
                let (m, name) = t[..t.find(')').unwrap()].split_once("::").unwrap();
                (m.to_string(), name.to_string())
            })
            .collect();
        (modules, tests)
    }

    fn module_source(module: &str) -> String {
        let dir = repo_root().join("e2e/tests/e2e");
        let main = fs::read_to_string(dir.join("main.rs")).unwrap();
        assert!(
            main.lines().any(|l| l == format!("mod {module};")),
            "whole-cluster names module {module}, which e2e/tests/e2e/main.rs does not declare"
        );
        fs::read_to_string(dir.join(format!("{module}.rs"))).unwrap()
    }

    #[test]
    fn every_name_in_the_whole_cluster_group_is_an_e2e_test() {
        let (modules, tests) = whole_cluster_names();
        assert!(
            modules.len() >= 5 && tests.len() >= 3,
            "{modules:?} {tests:?}"
        );
        for m in &modules {
            let source = module_source(m);
            assert!(source.contains("#[tokio::test"), "module {m} has no test");
        }
        for (m, _) in crate::cluster::chart::MODULE_VALUES {
            assert!(
                modules.iter().any(|w| w == m),
                "module {m} installs other chart values, so it must be in the whole-cluster group"
            );
        }
        for (m, name) in &tests {
            let source = module_source(m);
            let test = format!("]\nasync fn {name}() {{");
            assert!(source.contains(&test), "no test {m}::{name}");
        }
    }
}
