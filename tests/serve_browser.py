#!/usr/bin/env python3
"""tests/serve_browser.py URL PNG - the playground page of ptserve in headless Chromium (Debian's
chromium-driver and python3-selenium): loads it, types a prompt, clicks Generate, waits until
streamed text appears and the engine view shows the metrics, saves a screenshot to PNG."""
import sys, time
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

url, png = sys.argv[1], sys.argv[2]
o = webdriver.ChromeOptions()
for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1100,700"):
    o.add_argument(a)
d = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=o)
try:
    d.set_page_load_timeout(30)
    d.get(url)
    p = d.find_element(By.ID, "prompt")
    p.clear()
    p.send_keys("the lazy dog")
    t = d.find_element(By.ID, "maxtok")
    t.clear()
    t.send_keys("40")
    d.find_element(By.ID, "go").click()
    WebDriverWait(d, 30).until(lambda x: len(x.find_element(By.ID, "gen").text) > 0 and "done" in x.find_element(By.ID, "status").text)
    WebDriverWait(d, 10).until(lambda x: x.find_element(By.ID, "m_kv").text not in ("", "-"))
    gen = d.find_element(By.ID, "gen").text
    time.sleep(0.6)
    d.save_screenshot(png)
    print("streamed %d characters, status '%s', KV blocks %s" % (len(gen), d.find_element(By.ID, "status").text, d.find_element(By.ID, "m_kv").text))
finally:
    d.quit()
