def pytest_configure(config):
    config.addinivalue_line(
        "markers", "integration: drives the real engine and real nspawn hosts (slow, needs root)"
    )
